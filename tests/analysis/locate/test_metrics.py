"""The per-op metrics of the lockstep pass, measured chunk by chunk in one reused buffer, against the same
quantities computed whole in float64."""
import math

import pytest
import torch

from fpdiff.analysis.locate import CHUNK, _max_abs, _rel_l2, _Scratch


def whole(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    out, ref = out.reshape(-1).double(), ref.reshape(-1)
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)), float(ref.abs().max())


@pytest.mark.parametrize("shape,dtype,transpose", [((3 * CHUNK + 17,), torch.bfloat16, False),
                                                   ((512, 300), torch.float16, True),
                                                   ((5,), torch.float32, False)])
def test_chunked_metrics_equal_the_whole_tensor_ones(shape, dtype, transpose):
    torch.manual_seed(0)
    ref = torch.randn(shape, dtype=torch.float64) * 3
    ref = ref.t() if transpose else ref  # a view that is not contiguous: read in logical order
    out = ref.to(dtype)
    stats = _Scratch().stats(out, ref)
    err, _ = _rel_l2(out, ref, stats=stats)
    want_err, want_max = whole(out, ref)
    assert err == pytest.approx(want_err, rel=1e-13) and err > 0
    assert _max_abs(ref, stats) == want_max


def test_a_nonfinite_output_is_counted_and_a_nonfinite_reference_masked():
    ref = torch.linspace(-2, 2, 2 * CHUNK + 3, dtype=torch.float64)
    out = ref.to(torch.float16)
    out[CHUNK + 5] = math.inf
    scratch = _Scratch()
    assert _rel_l2(out, ref, scratch) == (math.inf, 1)
    ref2 = ref.clone()
    ref2[7] = math.nan
    stats = scratch.stats(ref2.to(torch.float16), ref2)
    assert _max_abs(ref2, stats) == 2.0  # the NaN is not the largest value, the finite 2.0 is
    err, bad = _rel_l2(ref2.to(torch.float16), ref2, stats=stats)
    assert bad == 0 and 0 < err < 1e-3


def test_empty_outputs_have_no_error():
    ref = torch.zeros(0, 4, dtype=torch.float64)
    stats = _Scratch().stats(ref.float(), ref)
    assert _rel_l2(ref.float(), ref, stats=stats) == (0.0, 0) and _max_abs(ref, stats) == 0.0
