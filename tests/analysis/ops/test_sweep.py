"""The sweep charges what torch.onnx wrote to torch.onnx, as check does (one rule: judging/rejudge.py's exporter rule):
interpolate with antialias and align_corners, and resize_ on a transposed view (storage order against the exported
Reshape's logical order), export graphs that compute another function; ONNX Runtime computes those graphs right, so
its cells are torch.onnx's errors at onnx export, never its mismatches, in programs and alone. A healthy cell stays a
pass."""
import pytest

from fpdiff import api
from fpdiff.core.errors import ONNX_EXPORT
from fpdiff.core.status import Status
from fpdiff.judging.rejudge import BLAMED, BLAMED_AT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def swept():
    """bilinear interpolate under the antialias variant and resize_ transposed, on torch and ORT at fp32 (the
    default programs of 8 cases: a failing cell is rerun alone)."""
    return api.ops(catalogs=["torch"], patterns=["nn.functional.interpolate.bilinear", "resize_"],
                   variants=["antialias", "transposed"], backends=["torch", "ort"], precisions=["fp32"],
                   repro_dir=None, recheck=False)


def _exported_wrong(c) -> bool:
    """The cells whose exported graph computes another function than torch's program."""
    return c.op == "resize_" and c.variant == "transposed" or (
        c.variant == "antialias" and "align_corners=True" in (c.description or ""))


def test_an_exported_graph_that_computes_another_function_is_torch_onnxs_error_not_ort_mismatch(swept):
    wrong = [c for c in swept.cells if c.backend == "ort" and _exported_wrong(c)]
    assert {c.op for c in wrong} == {"nn.functional.interpolate.bilinear", "resize_"}, [c.case for c in wrong]
    for c in wrong:
        assert c.status == Status.ERROR and (c.stage, c.component) == (ONNX_EXPORT, "torch.onnx"), (c.case, c.reason)
        assert "another function" in c.reason and c.info.get(BLAMED) == "dynamo", c.reason
        assert c.info.get(BLAMED_AT) == "fp64", c.reason  # the float64 export check showed it, its fallback raising


def test_healthy_cells_stay_quiet(swept):
    rest = [c for c in swept.cells if c.backend == "torch" or not _exported_wrong(c)]
    assert rest and all(c.status == Status.PASS for c in rest), [(c.case, c.backend, c.reason) for c in rest
                                                                   if c.status != Status.PASS]
    assert swept.programs["in_programs"] > 0  # the cases shared programs; the failing ones were judged alone
