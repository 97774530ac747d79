"""locate on compiled and plugin backends: bisection over standalone segments names the corrupted op."""
from pathlib import Path

import pytest

import fpdiff
from conftest import PLUGINS, SPECS
from fpdiff.core.status import Status

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast

PLUGIN = (str(PLUGINS / "perturb.py"),)


@pytest.mark.parametrize("model,backend,module", [
    ("example:tinyformer", "perturb", "mlp.0"),
    ("example:tinyformer", "perturb-qkv", "qkv"),
    ("example:tinycnn", "perturb", "features.0"),
    ("example:tinycnn", "perturb-last", "head"),
])
def test_a_corrupted_op_is_named(model, backend, module):
    r = fpdiff.locate(model, backend=backend, precision="fp32", plugins=PLUGIN)
    seg = r.segment
    assert seg is not None and seg.status == Status.MISMATCH
    assert seg.end - seg.start == 1, seg  # down to one op
    assert seg.module == module, seg
    assert r.compiles <= 2 * len(r.ops).bit_length() + 2
    # one culprit object whatever found it, and the output error is the requested backend's, not eager's
    c = r.as_dict()["culprit"]
    assert c["module"] == module and c["found_by"] == "segment bisection" and c["backend"] == backend
    assert c["node"] and c["source"].split(":")[0].endswith(".py") and c["op"] == seg.first_op
    assert c["evidence"]["rel_l2"] > 4 * c["evidence"]["baseline_rel_l2"]
    assert r.output_error > 100 * r.eager_output_error  # the plugin's 1e-3 error, not eager's ~1e-7


def test_tinyformer_first_corrupted_of_two_is_found_first():
    r = fpdiff.locate("example:tinyformer", backend="perturb-last", precision="fp32", plugins=PLUGIN)
    assert r.segment.module == "proj"  # proj comes before mlp.2 in graph order


@pytest.mark.parametrize("backend", ["ort", "iree", "inductor", "honest"])
def test_healthy_backend_gets_no_culprit_with_one_compile(backend):
    r = fpdiff.locate("example:tinycnn", backend=backend, precision="fp32", plugins=PLUGIN)
    assert r.segment is None and r.compiles == 1
    assert r.as_dict()["culprit"] is None and r.output_error < 1e-5


@pytest.fixture(scope="module")
def onnx_models(tmp_path_factory):
    import importlib.util

    import numpy as np
    import torch
    d = tmp_path_factory.mktemp("onnx")
    spec = importlib.util.spec_from_file_location("sap", SPECS / "scatter_add_pool.py")
    sap = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sap)
    torch.manual_seed(0)
    torch.onnx.export(sap.model().eval(), sap.inputs(), str(d / "sap.onnx"), dynamo=True, optimize=False)
    rng = np.random.default_rng(0)
    np.savez(d / "sap.npz", x=rng.standard_normal((12, 16)).astype(np.float32), bag=rng.integers(0, 4, 12))
    from fpdiff.sources import load
    tf = load("example:tinyformer")
    torch.onnx.export(tf.module, tf.inputs, str(d / "tf.onnx"), dynamo=True, optimize=False)
    return d


def test_onnx_model_refusal_is_narrowed_to_one_node_with_a_repro(onnx_models, tmp_path):
    import subprocess
    import sys
    r = fpdiff.locate(str(onnx_models / "sap.onnx"), backend="ort", precision="fp16",
                      inputs=str(onnx_models / "sap.npz"), repro=str(tmp_path / "b"))
    assert r.segment.end - r.segment.start == 1
    assert r.segment.ops[0].startswith("ScatterND") and r.segment.status == Status.UNSUPPORTED
    p = subprocess.run([sys.executable, r.repro], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode != 0 and "ScatterND" in p.stderr


@pytest.mark.parametrize("backend", ["ort", "iree"])
def test_onnx_model_on_a_healthy_backend_has_no_culprit(onnx_models, backend):
    r = fpdiff.locate(str(onnx_models / "tf.onnx"), backend=backend, precision="fp32")
    assert r.segment is None and r.compiles == 1


def test_onnx_model_refuses_torch_backends(onnx_models):
    from fpdiff.core.errors import UsageError
    with pytest.raises(UsageError, match="torch models"):
        fpdiff.locate(str(onnx_models / "tf.onnx"), backend="torch")


def test_mark_all_on_healthy_ort_judges_every_tensor_and_blames_none():
    r = fpdiff.locate("example:tinycnn", backend="ort", precision="fp16", mark_all=True)
    rows = r.mark_all.rows
    assert len(rows) >= 10 and r.mark_all.first_departure is None and r.segment is None
    # every tensor judged against the reference evaluator at fp16, not a bare tolerance
    assert all(row.status in (Status.PASS, Status.PRECISION_LOSS) for row in rows)
    assert r.mark_all.backend == "ort" and all(row.baseline_rel_l2 is not None for row in rows)


def test_mark_all_reports_an_ort_refusal(onnx_models):
    r = fpdiff.locate(str(onnx_models / "sap.onnx"), backend="ort", precision="fp16", mark_all=True,
                      inputs=str(onnx_models / "sap.npz"))
    assert "ScatterND" in r.mark_all.refused and r.segment.status == Status.UNSUPPORTED
    assert r.mark_all.backend == "ort" and r.findings[0].kind == Status.UNSUPPORTED


def test_mark_all_is_refused_before_any_work_for_a_backend_that_cannot_mark_every_tensor():
    from fpdiff.core.errors import UsageError
    with pytest.raises(UsageError, match="iree does not: use --backend") as e:
        fpdiff.locate("no-such-model.onnx", backend="iree", mark_all=True)  # refused before the model is read
    assert "ort" in str(e.value) and "onnxref" in str(e.value) and "\n" not in str(e.value)


def test_a_dynamic_shape_bug_is_located_only_under_dynamic_variants():
    for variant, found in (("static", False), ("dynamic", True), ("mixed:seq-static", True)):
        r = fpdiff.locate("example:tinyformer", backend="dynbug", precision="fp32", plugins=PLUGIN,
                          shape_variant=variant)
        assert (r.segment is not None) == found, variant
        if found:
            assert r.segment.module == "mlp.0" and r.segment.end - r.segment.start == 1


def test_router_segments_keep_mixed_dims_on_iree():
    r = fpdiff.locate("example:router", backend="iree", precision="fp32", shape_variant="mixed:tokens-static")
    assert r.segment is None and r.compiles == 1


def test_conv_filter_read_with_swapped_dims_is_located_deep_in_a_stack():
    from conftest import SPECS
    r = fpdiff.locate(str(SPECS / "conv1d_stack.py"), backend="convswap", precision="fp32", plugins=PLUGIN)
    assert len(r.ops) >= 20
    assert r.segment.module == "blocks.3.0" and r.segment.ops == ["aten.conv1d.default"]
    check = fpdiff.check(str(SPECS / "conv1d_stack.py"), backends=["convswap"], precisions=["fp32"], plugins=PLUGIN)
    assert check.cells[0].status == Status.MISMATCH


def test_iree_segments_of_a_multi_output_op_import_like_the_whole_model():
    # chunk's value survives torch.export save/load as a tuple, which IREE's importer refused: a false culprit
    r = fpdiff.locate("example:tinyformer", backend="iree", precision="fp32")
    assert r.segment is None and r.compiles == 1


def test_iree_fp64_refusal_is_narrowed_to_gelu():
    r = fpdiff.locate("example:tinyformer", backend="iree", precision="fp64")
    assert r.segment.ops == ["aten.gelu.default"] and r.segment.module == "mlp.1"
    assert "math.erf" in r.segment.reason and r.compiles <= 2 * len(r.ops).bit_length() + 2


def test_old_ir_zoo_model_segments_are_valid_graphs_and_blame_nothing_on_a_healthy_backend():
    """The opset-9 squeezenet is IR version 3 (every weight also a graph input): its segments must still be valid
    graphs, else the cut itself fails and is charged to the backend as a false culprit."""
    import onnx
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / "light_squeezenet.onnx"
    r = fpdiff.locate(str(path), backend="ort", precision="fp32")
    assert r.segment is None, r.segment


def test_progress_tells_each_segment_compiled():
    told = []
    r = fpdiff.locate("example:tinycnn", backend="perturb", precision="fp32", plugins=PLUGIN,
                      progress=lambda *a: told.append(a))
    segs = [t for t in told if t[0] == "segments"]
    assert [t[1] for t in segs] == list(range(1, r.compiles + 1)) and all(t[2] is None for t in segs)
