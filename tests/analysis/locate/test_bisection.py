"""The segment bisection against a fake backend (no compiles): it narrows a wrong op to one unit in about
2*log2(ops) verdicts, and follows only failures of the same kind as the whole graph's."""
import math

import pytest

from fpdiff.analysis.locate.bisection import Asking, Bisector, SegmentVerdict
from fpdiff.core.status import Status


class FakeBisector(Bisector):
    """Units 0..n-1; a segment is judged by `judge(start, end)` instead of a compile and a run."""

    def __init__(self, n: int, judge) -> None:  # no model, no worker pool
        self.units = [[f"u{i}"] for i in range(n)]
        self.asked: dict = {}
        self._judge = judge

    def verdict(self, start: int, end: int) -> SegmentVerdict:
        if (start, end) not in self.asked:
            status, reason = self._judge(start, end)
            self.asked[(start, end)] = SegmentVerdict(start, end, status, reason)
        return self.asked[(start, end)]


def wrong_at(bad: int):
    return lambda s, e: (Status.MISMATCH, "rel L2 far over the baseline") if s <= bad < e else (Status.PASS, "ok")


def test_one_wrong_op_is_found_wherever_it_sits_in_few_verdicts():
    n = 40
    for bad in (0, 1, 17, 38, 39):
        b = FakeBisector(n, wrong_at(bad))
        found = b.bisect()
        assert (found.start, found.end) == (bad, bad + 1), bad
        assert len(b.asked) <= 2 * math.ceil(math.log2(n)) + 2


def test_a_healthy_graph_costs_one_verdict():
    b = FakeBisector(40, lambda s, e: (Status.PASS, "ok"))
    assert b.bisect() is None and len(b.asked) == 1


def test_a_segment_failing_for_a_reason_of_its_own_is_not_chased():
    """The whole graph is refused at op 30. Prefixes ending in 21..30 fail too, but with another message (an
    importer that cannot take the cut): followed, they would pull the answer to op 20; they must not."""
    def judge(s, e):
        if s <= 30 < e:
            return Status.UNSUPPORTED, "cannot lower torch.aten.foo in fp16"
        if s == 0 and 21 <= e <= 30:
            return Status.UNSUPPORTED, "importer: segment input is not a tensor"
        return Status.PASS, "ok"
    b = FakeBisector(40, judge)
    found = b.bisect()
    assert (found.start, found.end) == (30, 31)
    assert (0, 30) in b.asked  # the decoy was met, and passed over


def test_the_same_failure_with_other_paths_and_line_numbers_is_followed():
    def judge(s, e):
        if s <= 12 < e:
            return Status.ERROR, (f"iree-compile failed: /tmp/fpdiff-iree-{s}x{e}/model.mlir:{e}:3: error: "
                                  "util.initializer")
        return Status.PASS, "ok"
    found = FakeBisector(20, judge).bisect()
    assert (found.start, found.end) == (12, 13)


@pytest.mark.slow
def test_agreeing_with_a_baseline_that_is_not_finite_is_no_verdict(tmp_path):
    """IREE at fp16 overflows where the reference evaluator at fp16 does: both infinite. That shows nothing about
    IREE's ops; locate says the precision overflows on the model instead of "the whole graph agrees"."""
    import numpy as np

    import fpdiff
    import onnx_models as om
    path = om.save(om.overflowing_variance(), tmp_path / "var.onnx")
    np.savez(tmp_path / "in.npz", x=(np.random.default_rng(1).standard_normal((2, 64)) * 400).astype(np.float32))
    r = fpdiff.locate(path, backend="iree", precision="fp16", inputs=str(tmp_path / "in.npz"))
    assert r.segment is None
    assert [f.kind for f in r.findings][:1] == ["baseline-nonfinite"], r.findings


@pytest.mark.slow
def test_segments_holding_an_if_keep_what_its_branches_read(tmp_path):
    """An If's branches read x and a weight from the outer graph without listing them as inputs: a segment cut
    around the If keeps them (the extractor, following listed inputs only, lost them and the run crashed)."""
    import numpy as np

    import fpdiff
    import onnx_models as om
    path = om.save(om.if_conv(), tmp_path / "if.onnx")
    np.savez(tmp_path / "in.npz", cond=np.array(True),
             x=np.random.default_rng(0).standard_normal((1, 2, 8)).astype(np.float32))
    r = fpdiff.locate(path, backend="ort", precision="fp16", inputs=str(tmp_path / "in.npz"))
    assert r.bisected and r.segment is None, (r.segment, r.findings)


@pytest.mark.slow
def test_agreeing_with_a_baseline_that_fails_the_tolerance_says_the_precision_is_too_coarse(tmp_path):
    """The norm's variance overflows in fp16 and its Sigmoid output is 0.56 off in IREE and in the evaluator alike:
    no op of IREE departs, and locate says the precision, not the backend, fails."""
    import numpy as np

    import fpdiff
    import onnx_models as om
    path = om.save(om.overflowing_norm(), tmp_path / "ln.onnx")
    np.savez(tmp_path / "in.npz", x=(np.random.default_rng(1).standard_normal((2, 64)) * 400).astype(np.float32))
    r = fpdiff.locate(path, backend="iree", precision="fp16", inputs=str(tmp_path / "in.npz"))
    assert r.segment is None
    assert [f.kind for f in r.findings][:1] == ["baseline-fails"], r.findings


def test_a_segments_outputs_are_judged_one_by_one():
    """A mask of -3.4e38 beside a small output that departs: flattened together the departure reads as a pass; on
    its own it is the segment's mismatch."""
    import numpy as np

    from fpdiff.analysis.locate.bisection import worst_output
    from fpdiff.core import precision as prec
    mask = np.full((4, 4), -3.4e38)
    small = np.linspace(-1, 1, 64)
    expected, eager = [mask, small], [mask, small * (1 + 1e-4)]
    got = [mask, small * 1.5]
    m, base, j = worst_output(expected, got, eager, prec.get("fp16"))
    assert j.status == Status.MISMATCH and j.reason.startswith("output 1 of 2:"), j.reason
    m, base, j = worst_output(expected, eager, eager, prec.get("fp16"))
    assert j.status == Status.PASS


class _WeightRetyped(__import__("torch").nn.Module):
    """An RMSNorm's way with its weight: `w.to(x.dtype)` is a node whose float64 value is the weight itself."""

    def __init__(self) -> None:
        import torch
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        w = self.w.to(x.dtype)
        return (x * w).sum(-1, keepdim=True) * w


def test_a_segment_cut_right_after_a_weight_is_retyped_runs():
    """Every cut of the graph gives plain float64 arrays and inputs, including a cut whose output or input is a node
    that only re-types a weight (Gemma 2's RMSNorm: '.numpy() is not supported for tensor subclasses')."""
    import torch

    from fpdiff.core import precision as prec
    from fpdiff.model.weights import LazyCast
    b = Bisector(_WeightRetyped(), (torch.randn(2, 8),), Asking(prec.FP32, "torch", timeout=60.0))
    try:
        assert any(isinstance(v, LazyCast) for v in b.v64.values())  # the case this test is about
        for k in range(1, b.count()):  # the dtype assertion goes with the op after it: every cut has a value
            _, _, ins, _, expected, _ = b.segment(0, k)
            _, _, ins2, _, _, _ = b.segment(k, b.count())
            assert all(type(t) is torch.Tensor for t in ins + ins2)
            assert all(e.dtype.kind in "fiub" for e in expected)
    finally:
        b.close()


def test_a_segment_calling_a_custom_op_loads_in_the_worker():
    """A segment holding a custom op its model's own import registered (transformers' grouped_mm_fallback in a MoE)
    is loaded in a worker that never imported the model: the job names the import ('We ran into an error when
    deserializing the saved file' was charged to the backend)."""
    from pathlib import Path

    import torch

    from fpdiff.core import precision as prec
    from fpdiff.core.status import Status
    from fpdiff.sources.spec import import_spec
    spec = import_spec(Path(__file__).parents[2] / "specs" / "custom_op.py")
    torch.manual_seed(0)
    b = Bisector(spec.model().eval(), spec.inputs(), Asking(prec.FP32, "torch"))
    try:
        job, *_ = b._job(0, b.count())
        assert job.source.requires == (str(Path(spec.__file__).resolve()),)
        v = b.verdict(0, b.count())
        assert v.status == Status.PASS, v.reason
    finally:
        b.close()


def test_a_segment_torch_eager_cannot_run_on_float64_values_is_no_verdict_and_not_chased():
    """T5 at bf16: a cut fed the float64 run's integers beside values computed at bf16 makes torch eager index out of
    range where the whole model runs. That segment is unjudged (fpdiff's boundary), not a crash of locate, and the
    bisection goes past it to the real failure."""
    from fpdiff.analysis.locate.bisection import Unrunnable

    class Cut(FakeBisector):
        def _job(self, start, end):
            raise Unrunnable("torch eager cannot run the segment at bf16 on the float64 run's values")

    b = Cut(8, None)
    v = Bisector.verdict(b, 2, 5)
    assert v.status == Status.UNJUDGED and "float64 run's values" in v.reason
    assert (2, 5) in b.asked

    def judge(s, e):  # unrunnable cuts starting at 1..3; the whole graph's failure is op 5's
        if 1 <= s <= 3:
            return Status.UNJUDGED, "torch eager cannot run the segment"
        return (Status.MISMATCH, "far over the baseline") if s <= 5 < e else (Status.PASS, "ok")
    found = FakeBisector(8, judge).bisect()
    assert found.end == 6 and found.start <= 5  # a hole in the starts can widen the answer; it still holds op 5
