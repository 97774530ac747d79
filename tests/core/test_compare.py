"""Metrics and verdict rules on hand-made outputs."""
import math

import numpy as np
import pytest
import torch

from fpdiff.core import compare
from fpdiff.core.compare import rel_l2
from fpdiff.core.precision import get
from fpdiff.core.status import Status


def m(ref, out, dtype=torch.float32):
    return compare.measure([np.asarray(ref, dtype=np.float64)], [np.asarray(out, dtype=np.float64)], dtype)


def test_metrics_of_a_known_error():
    ref = np.array([1.0, 2.0, -4.0, 0.5])
    out = ref + np.array([0.0, 0.002, 0.0, 0.0])
    r = m(ref, out)
    assert math.isclose(r.max_abs, 0.002, rel_tol=1e-9)
    assert math.isclose(r.max_rel, 0.001, rel_tol=1e-9)
    assert math.isclose(r.rel_l2, 0.002 / np.linalg.norm(ref), rel_tol=1e-9)
    assert math.isclose(r.max_norm, 0.002 / 4.0, rel_tol=1e-9)
    assert r.cosine > 0.99999 and r.snr_db > 60
    # fp32 spacing at 2.0 is 2**-22: the error is 0.002 / 2**-22 ULPs
    assert math.isclose(r.ulp_max, 0.002 / 2**-22, rel_tol=1e-6)


def test_ulps_at_fp16_of_a_single_rounding_are_at_most_half():
    ref = np.random.default_rng(0).standard_normal(1000)
    out = ref.astype(np.float16).astype(np.float64)
    r = m(ref, out, torch.float16)
    assert r.ulp_max <= 0.5 + 1e-9 and r.ulp_max > 0.3


def test_exact_output_is_perfect():
    r = m([1.0, 2.0], [1.0, 2.0])
    assert r.max_abs == 0 and r.rel_l2 == 0 and r.snr_db == math.inf and math.isclose(r.cosine, 1.0)


def test_nan_and_inf_are_counted_where_reference_is_finite():
    r = m([1.0, 2.0, 3.0], [np.nan, np.inf, 3.0])
    assert (r.nan, r.inf) == (1, 1) and r.rel_l2 == math.inf


def _metrics(rel_l2, max_norm=None, numel=10000, nan=0):
    return compare.Metrics(0, 0, rel_l2, 1, 0, 0, 0, rel_l2 if max_norm is None else max_norm, nan, 0, numel)


def test_pass_within_tolerance():
    assert compare.judge(_metrics(5e-6), get("fp32"), _metrics(1e-7)).status == Status.PASS


def test_precision_loss_when_baseline_is_as_bad():
    j = compare.judge(_metrics(3e-2), get("fp16"), _metrics(2e-2))
    assert j.status == Status.PRECISION_LOSS and "too coarse" in j.reason


def test_mismatch_when_far_worse_than_baseline():
    j = compare.judge(_metrics(2e-4), get("fp32"), _metrics(1e-7))
    assert j.status == Status.MISMATCH and "baseline" in j.reason


def test_small_outputs_get_a_wider_factor():
    base = _metrics(1e-5, numel=10)
    assert compare.judge(_metrics(6e-5, numel=10), get("fp32"), base).status == Status.PRECISION_LOSS
    assert compare.judge(_metrics(6e-5, numel=10000), get("fp32"), _metrics(1e-5)).status == Status.MISMATCH


def test_localized_error_is_mismatch_even_within_l2_tolerance():
    j = compare.judge(_metrics(5e-6, max_norm=1e-3), get("fp32"), _metrics(1e-7))
    assert j.status == Status.MISMATCH and "few elements" in j.reason


def test_nonfinite_is_precision_loss_only_when_baseline_is_nonfinite_too():
    both = compare.judge(_metrics(math.inf, nan=3), get("fp16"), _metrics(math.inf, nan=3))
    assert both.status == Status.PRECISION_LOSS
    assert compare.judge(_metrics(math.inf, nan=3), get("fp16"), _metrics(1e-3)).status == Status.MISMATCH


def test_a_nonfinite_cell_beside_a_baseline_with_no_correct_digit_is_the_same_failure_not_a_worse_one():
    j = compare.judge(_metrics(math.inf, nan=3), get("fp16"), _metrics(1.0))
    assert j.status == Status.PRECISION_LOSS and "no correct digit" in j.reason
    assert compare.judge(_metrics(math.inf, nan=3), get("fp16"), _metrics(0.3)).status == Status.MISMATCH


def test_a_finite_cell_beside_a_baseline_that_overflows_is_not_said_within_a_factor_of_inf():
    j = compare.judge(_metrics(5e-2), get("fp16"), _metrics(math.inf, nan=2))
    assert j.status == Status.PRECISION_LOSS and "not finite" in j.reason and "x the baseline" not in j.reason


def test_no_baseline_never_claims_a_bug():
    j = compare.judge(_metrics(1.0), get("fp16"), None)
    assert j.status == Status.PRECISION_LOSS and j.findings[0].kind == "no-baseline"


def test_range_findings_name_overflow_in_fp16_but_not_bf16():
    ref = [np.array([1e5, 1.0])]
    assert [f.kind for f in compare.range_findings(ref, get("fp16"))] == ["overflow"]
    assert compare.range_findings(ref, get("bf16")) == []


def _rounded(ref, dtype):
    return torch.from_numpy(ref).to(dtype).double().numpy()


def test_effective_bits_of_rounding_to_each_format_against_an_fp16_baseline():
    """Rounding the same values to bf16 instead of fp16 reads as ~8 bits, to fp16 as 11: the estimate works."""
    ref = np.random.default_rng(1).standard_normal(4096)
    base = m(ref, _rounded(ref, torch.float16), torch.float16)
    bf = m(ref, _rounded(ref, torch.bfloat16), torch.float16)
    assert abs(compare.effective_bits(base, base, torch.float16) - 11) < 1e-9
    assert abs(compare.effective_bits(bf, base, torch.float16) - 8) < 0.5


def test_a_pass_that_computes_in_bf16_when_fp16_was_asked_is_flagged():
    ref = np.random.default_rng(2).standard_normal(4096)
    p = get("fp16")
    base = m(ref, _rounded(ref, torch.float16), torch.float16)
    bf = m(ref, _rounded(ref, torch.bfloat16), torch.float16)
    j = compare.judge(bf, p, base)
    assert j.status == Status.PASS  # under the 1e-2 tolerance ...
    f = [f for f in j.findings if f.kind == "coarser-than-requested"]
    assert f and "bf16" in f[0].message  # ... but not silent
    assert not compare.judge(base, p, base).findings


def test_healthy_spreads_are_not_coarser():
    """Two correct fp16 implementations differ by up to a few x in error; fp32 ones by more (other exp/tanh):
    neither crosses the rule (fp16 limit 4x; fp32 limit ~90x: a TF32 downgrade costs 13 bits)."""
    ref = np.random.default_rng(3).standard_normal(4096)
    noise = np.random.default_rng(4).standard_normal(4096)
    for dtype, name, ratio in ((torch.float16, "fp16", 3.5), (torch.float32, "fp32", 60.0)):
        p = get(name)
        u = p.unit_roundoff
        base = m(ref, ref * (1 + u * noise), dtype)
        cell = m(ref, ref * (1 + ratio * u * noise), dtype)
        assert compare.coarser_than_requested(cell, p, base) is None, name
    p = get("fp32")
    tf32_like = m(ref, ref * (1 + 2 ** -11 * noise), torch.float32)
    base = m(ref, ref * (1 + p.unit_roundoff * noise), torch.float32)
    assert compare.coarser_than_requested(tf32_like, p, base) is not None


def test_below_one_unit_roundoff_nothing_is_coarser():
    ref = np.linspace(1, 2, 100)
    exact = m(ref, ref, torch.float16)
    tiny = m(ref, ref * (1 + 1e-6), torch.float16)
    assert compare.coarser_than_requested(tiny, get("fp16"), exact) is None


def test_a_mismatch_shaped_like_the_next_format_says_so_and_a_bug_does_not():
    ref = np.random.default_rng(5).standard_normal(4096)
    p = get("fp32")
    base = m(ref, _rounded(ref, torch.float32), torch.float32)
    as_fp16 = m(ref, _rounded(ref, torch.float16), torch.float32)  # fp32 asked, an fp16/tf32 round came back
    assert "fp16 or tf32" in compare.judge(as_fp16, p, base).reason
    bug = m(ref, ref * 1.3, torch.float32)
    j = compare.judge(bug, p, base)
    assert j.status == Status.MISMATCH and "computes like" not in j.reason


def test_repeat_difference_is_bitwise_and_nan_aware():
    a = [np.array([1.0, np.nan, 3.0])]
    assert compare.repeat_difference(a, [[np.array([1.0, np.nan, 3.0])]]) is None
    d = compare.repeat_difference(a, [[np.array([1.0, np.nan, 3.0 + 2e-16 * 3])]])
    assert d and d.startswith("1 of 3")
    assert compare.repeat_difference(a, []) is None


def test_statuses_are_the_report_strings():
    """The JSON report and messages carry the plain strings; the type only names them."""
    import json

    from fpdiff.core.status import CELL_STATUSES
    assert json.dumps([Status.PASS, Status.PRECISION_LOSS]) == '["pass", "precision-loss"]'
    assert f"{Status.MISMATCH}" == "mismatch" and str(Status.UNJUDGED) == "unjudged"
    assert Status.ERROR == "error" and "ok" not in CELL_STATUSES


def test_tiny_outputs_flushed_to_zero_are_a_full_error_not_a_pass():
    """Squares of 1e-160 underflow to 0: a norm of raw values read an all-zero output as rel L2 0 (pass)."""
    ref = np.random.default_rng(1).standard_normal(500) * 1e-160
    r = m(ref, np.zeros_like(ref), torch.float64)
    assert r.rel_l2 == 1.0 and r.max_norm == 1.0 and r.cosine == 0.0
    j = compare.judge(r, get("fp64"), m(ref, ref * (1 + 1e-16), torch.float64))
    assert j.status == Status.MISMATCH, j.reason  # at fp64 the value is representable: returning zeros is wrong
    # at fp32 it is not: the baseline at fp32 flushes too, so the precision cannot hold it (precision-loss)
    j32 = compare.judge(r, get("fp32"), r)
    assert j32.status == Status.PRECISION_LOSS, j32.reason


def test_tiny_and_huge_outputs_measure_as_at_unit_scale():
    rng = np.random.default_rng(2)
    ref = rng.standard_normal(1000)
    out = ref * (1 + 1e-6 * rng.standard_normal(1000))
    unit = m(ref, out, torch.float64)
    for scale in (1e-160, 1e-300, 1e200, 1e300):
        with np.errstate(all="raise"):  # no numpy warning may reach stderr
            r = m(ref * scale, out * scale, torch.float64)
        assert math.isfinite(r.rel_l2) and math.isclose(r.rel_l2, unit.rel_l2, rel_tol=1e-9), (scale, r.rel_l2)
        assert math.isclose(r.max_norm, unit.max_norm, rel_tol=1e-9)
        assert math.isclose(r.cosine, unit.cosine, rel_tol=1e-12) and math.isclose(r.snr_db, unit.snr_db)


def test_an_error_beyond_the_float64_range_is_infinite_not_nan():
    r = m([1e308, -1e308], [-1e308, 1e308], torch.float64)
    assert r.rel_l2 == math.inf and r.max_norm == math.inf
    assert compare.judge(r, get("fp64"), m([1e308], [1e308], torch.float64)).status == Status.MISMATCH


def test_a_nan_metric_never_decides_silently():
    j = compare.judge(_metrics(math.nan), get("fp32"), _metrics(1e-7))
    assert j.status == Status.ERROR and "NaN" in j.reason


def test_integer_outputs_are_counted_as_flips_not_put_in_the_norm():
    ref = [np.array([0.5, 1.5]), np.arange(100, dtype=np.int64), np.ones(10, dtype=bool)]
    out = [np.array([0.5, 1.5]), np.arange(100, dtype=np.int64), np.ones(10, dtype=bool)]
    out[1][[3, 7]] = [99, 0]
    out[2][0] = False
    r = compare.measure(ref, out, torch.float32)
    assert r.rel_l2 == 0 and r.numel == 2  # the float outputs are exact
    assert (r.discrete, r.flips) == (110, 3)


def test_flips_are_judged_against_the_baselines_flips():
    fp16 = get("fp16")
    assert compare.judge_flips(0, 1000, 0, "fp16").status == Status.PASS
    assert compare.judge_flips(1, 1000, 0, "fp16").status == Status.PRECISION_LOSS  # one near tie: noise
    assert compare.judge_flips(2, 1000, 0, "fp16").status == Status.MISMATCH  # exact integer arithmetic breaks
    assert compare.judge_flips(12, 1000, 3, "fp16").status == Status.PRECISION_LOSS
    assert compare.judge_flips(14, 1000, 3, "fp16").status == Status.MISMATCH
    assert compare.judge_flips(5, 1000, None, "fp16").status == Status.PRECISION_LOSS
    # the cell's verdict is the worse of its float outputs' and its integer outputs'
    ref = [np.linspace(1, 2, 2000), np.arange(50)]
    good = [ref[0] * (1 + 1e-4), ref[1].copy()]
    bad = [ref[0] * (1 + 1e-4), ref[1].copy()]
    bad[1][:10] += 1
    base = compare.measure(ref, good, fp16.compute)
    assert compare.judge(compare.measure(ref, good, fp16.compute), fp16, base).status == Status.PASS
    j = compare.judge(compare.measure(ref, bad, fp16.compute), fp16, base)
    assert j.status == Status.MISMATCH and "10 of 50 integer" in j.reason


def test_rel_l2_of_arrays_neither_underflows_nor_overflows():
    tiny = np.array([1e-160, -3e-160, 2e-160])
    assert rel_l2(tiny, np.zeros(3)) == pytest.approx(1.0)  # unscaled, 1e-320 squares read 0 / 0
    assert rel_l2(tiny, tiny * (1 + 1e-12)) == pytest.approx(1e-12, rel=1e-3)
    huge = np.array([1e200, -2e200])
    assert rel_l2(huge, huge * (1 + 1e-9)) == pytest.approx(1e-9, rel=1e-3)  # unscaled: inf / inf = nan


def test_rel_l2_of_arrays_exact_where_equal_and_infinite_where_not_finite():
    a = np.array([1.0, np.nan, np.inf])
    assert rel_l2(a, a.copy()) == 0.0
    assert rel_l2(a, np.array([1.0, 0.0, np.inf])) == float("inf")
    assert rel_l2(np.ones(3), np.ones(4)) == float("inf")


def test_each_output_is_measured_by_the_first_comparator_that_claims_it():
    ints = np.array([0.0, 1.0, 2.0, np.nan])  # round()'s output: integers, and NaN where its input was
    half = np.array([0.0, 2.0, 2.0, np.nan])  # one tie broken the other way
    mask, mask_out = np.array([True, False]), np.array([True, True])
    floats = np.array([0.5, 1.5])
    plain = compare.measure([ints, mask, floats], [half, mask_out, floats], torch.float32)
    assert (plain.discrete, plain.flips) == (2, 1)  # the bool mask flips; the integer-valued float is a float here
    assert plain.rel_l2 > 0.1
    flipped = compare.measure([ints, mask, floats], [half, mask_out, floats], torch.float32,
                              compare.WITH_INTEGER_VALUED)
    assert (flipped.discrete, flipped.flips) == (6, 2)  # NaN where float64 has NaN is no flip
    assert flipped.rel_l2 == 0.0  # the float output alone is measured by norms, and it is exact
    claimed = [c for c, _, _ in compare.pair([ints, mask, floats], [half, mask_out, floats],
                                               compare.WITH_INTEGER_VALUED)]
    assert claimed == [compare.INTEGER_VALUED, compare.DISCRETE, compare.FLOATING]


def test_a_float_output_holds_integers_only_when_its_finite_values_are_integers():
    assert compare.holds_integers(np.array([1.0, -3.0, np.inf]))
    assert not compare.holds_integers(np.array([1.0, 2.5]))
    assert not compare.holds_integers(np.array([np.nan]))  # nothing finite: nothing to count flips of
    assert not compare.holds_integers(np.array([1, 2]))  # an integer dtype is DISCRETE's
