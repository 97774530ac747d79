"""Metrics and verdict rules on hand-made outputs."""
import math

import numpy as np
import torch

from fpdiff import compare
from fpdiff.precision import get


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
    assert compare.judge(_metrics(5e-6), get("fp32"), _metrics(1e-7)).status == "pass"


def test_precision_loss_when_baseline_is_as_bad():
    j = compare.judge(_metrics(3e-2), get("fp16"), _metrics(2e-2))
    assert j.status == "precision-loss" and "too coarse" in j.reason


def test_mismatch_when_far_worse_than_baseline():
    j = compare.judge(_metrics(2e-4), get("fp32"), _metrics(1e-7))
    assert j.status == "mismatch" and "baseline" in j.reason


def test_small_outputs_get_a_wider_factor():
    base = _metrics(1e-5, numel=10)
    assert compare.judge(_metrics(6e-5, numel=10), get("fp32"), base).status == "precision-loss"
    assert compare.judge(_metrics(6e-5, numel=10000), get("fp32"), _metrics(1e-5)).status == "mismatch"


def test_localized_error_is_mismatch_even_within_l2_tolerance():
    j = compare.judge(_metrics(5e-6, max_norm=1e-3), get("fp32"), _metrics(1e-7))
    assert j.status == "mismatch" and "few elements" in j.reason


def test_nonfinite_is_precision_loss_only_when_baseline_is_nonfinite_too():
    assert compare.judge(_metrics(math.inf, nan=3), get("fp16"), _metrics(math.inf, nan=3)).status == "precision-loss"
    assert compare.judge(_metrics(math.inf, nan=3), get("fp16"), _metrics(1e-3)).status == "mismatch"


def test_no_baseline_never_claims_a_bug():
    j = compare.judge(_metrics(1.0), get("fp16"), None)
    assert j.status == "precision-loss" and j.findings[0].kind == "no-baseline"


def test_range_findings_name_overflow_in_fp16_but_not_bf16():
    ref = [np.array([1e5, 1.0])]
    assert [f.kind for f in compare.range_findings(ref, get("fp16"))] == ["overflow"]
    assert compare.range_findings(ref, get("bf16")) == []
