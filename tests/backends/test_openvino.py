"""OpenVINO: the precision is a hint its CPU plugin may override; the cell reports what the plugin really ran."""
import copy
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import fpdiff
from fpdiff.backends.openvino import HINT_REPLACED, computed_dtype
from fpdiff.core import precision as prec
from fpdiff.core.status import Status

pytest.importorskip("openvino", reason="openvino is not installed (pip install openvino)")
SPECS = Path(__file__).parents[1] / "specs"

ZOO = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def _native(fmt: str) -> bool:
    """Whether this CPU computes `fmt` (FP16, BF16) natively, by the plugin's own word."""
    import openvino as ov
    return fmt in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def _native_fp16() -> bool:
    return _native("FP16")


def _read_as_ran(cell) -> None:
    """A bf16 hint's cell is read as what ran: bf16 where the CPU computes it, float32 where the plugin replaced
    the hint (AVX2), and never plain bfloat16 where it reports bf16 but its numbers say wider (AVX512 without BF16)."""
    kinds = {f.kind for f in cell.findings}
    if _native("BF16"):
        assert cell.computed_dtype == "bfloat16", cell.computed_dtype
    elif cell.info["inference_precision"] == "f32":
        assert cell.computed_dtype == "float32" and {HINT_REPLACED, "dtype-changed"} <= kinds, (cell.computed_dtype,
                                                                                                kinds)
    else:
        assert cell.computed_dtype == "bfloat16" or "computed-wider" in kinds, (cell.computed_dtype, kinds)


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_grid_reports_the_precision_the_plugin_ran():
    """What each hint computes depends on the CPU (docs/backends.md, by CPU kind); on every kind the cell says what
    ran, by the plugin's record or by its numbers, and is never read as a format it did not compute."""
    r = fpdiff.check("example:tinycnn", backends=["openvino"], precisions=["fp32", "fp16", "bf16", "fp64", "amp-bf16"])
    cells = {c.precision: c for c in r.cells if c.backend == "openvino"}
    assert cells["fp32"].status == Status.PASS and cells["fp32"].info["inference_precision"] == "f32"
    bf16 = cells["bf16"]
    assert bf16.status == Status.PASS
    _read_as_ran(bf16)
    if _native("BF16"):
        assert bf16.info["inference_precision"] == "bf16"
        assert not [f for f in bf16.findings if f.kind == "dtype-changed"]  # fp32 outputs, bf16 inside: its record says
    fp16 = cells["fp16"]
    kinds = {f.kind for f in fp16.findings}
    if _native_fp16():
        assert fp16.info["inference_precision"] == "f16"
    else:  # the plugin turns an f16 hint into what this CPU computes: said twice, by two witnesses
        ran = fp16.info["inference_precision"]
        assert ran in ("bf16", "f32"), ran
        assert f"asked for f16 and runs {ran}" in next(f.message for f in fp16.findings if f.kind == HINT_REPLACED)
        changed = next(f for f in fp16.findings if f.kind == "dtype-changed")  # the one rule, on what it ran
        assert "ran 0 of" in changed.message and "in float16" in changed.message
        if ran == "bf16":
            assert fp16.computed_dtype == "bfloat16" and "coarser-than-requested" in kinds
            assert "read this cell as bfloat16" in changed.remedy
        else:
            assert fp16.computed_dtype == "float32" and "read this cell as float32" in changed.remedy
    for name, words in (("fp64", "no fp64 inference precision"), ("amp-bf16", "no autocast")):
        assert cells[name].status == Status.UNSUPPORTED and words in cells[name].reason


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_onnx_model_runs_from_its_own_graph(tmp_path):
    path = tmp_path / "mlp.onnx"
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
    torch.onnx.export(m.eval(), (torch.randn(3, 16),), str(path), dynamo=False, input_names=["x"])
    r = fpdiff.check(str(path), backends=["openvino"], precisions=["fp32", "bf16"])
    cells = {c.precision: c for c in r.cells if c.backend == "openvino"}
    assert cells["fp32"].status == Status.PASS, cells["fp32"].reason
    assert cells["bf16"].status in (Status.PASS, Status.PRECISION_LOSS)
    _read_as_ran(cells["bf16"])


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_tied_logits_of_placeholder_weights_are_ill_conditioned_not_a_mismatch():
    """The zoo squeezenet's placeholder weights give 1000 logits of 6.8e9, equal in float64; OpenVINO's fp32 sums
    them to within 2e-7 of each other, which a softmax turns into a different answer. The float64 reference itself
    moves as much under rounding-sized perturbations, so the model cannot answer: ill-conditioned, with numbers.
    Whether the tie breaks depends on the order the CPU's kernels sum in: on AVX2 the plugin's sums keep it, and the
    cell passes; never a mismatch."""
    r = fpdiff.check(str(ZOO / "light_squeezenet.onnx"), backends=["openvino"], precisions=["fp32"])
    cell = next(c for c in r.cells if c.backend == "openvino")
    if cell.status == Status.PASS:
        assert cell.metrics["rel_l2"] < 1e-5, cell.reason
        return
    assert cell.status == Status.ILL_CONDITIONED and cell.metrics["rel_l2"] > 1, cell.reason
    assert "moves by" in cell.reason, cell.reason
    assert [(v.rule, v.was, v.now) for v in cell.revisions] == [("float64", "ok", "mismatch"),
                                                              ("conditioning", "mismatch", "ill-conditioned")]


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_locate_bisects_on_openvino():
    r = fpdiff.locate("example:tinycnn", backend="openvino", precision="bf16")
    assert r.bisected and r.compiles >= 1 and r.segment is None  # the whole graph agrees with torch's bf16


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_repro_bundle_runs_with_openvino_alone(tmp_path):
    from fpdiff.analysis.locate import repro
    from fpdiff.backends.openvino import OpenVinoBackend
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()).to(torch.bfloat16)
    x = torch.randn(4, 8).to(torch.bfloat16)
    program = torch.export.export(m, (x,), strict=False)
    expected = [copy.deepcopy(m).double()(x.double()).detach().numpy()]  # .double() in place would reach the program
    where = repro.Where(OpenVinoBackend(), prec.get("bf16"), "cpu", (), {})
    script = repro.write(tmp_path / "b", where, "openvino", (program, [x], expected), None, 1e-2, 1.0)
    text = script.read_text()
    imports = "\n".join(ln for ln in text.splitlines() if "import" in ln)
    assert "torch" not in imports and "fpdiff" not in imports and (tmp_path / "b" / "segment.xml").exists()
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"OpenVINO ran at {'bf16' if _native('BF16') else ''}" in p.stdout  # f32 where the hint is replaced
    rel = float(p.stdout.split("relative L2 vs float64 = ")[1].split()[0])
    assert 0 < rel < 3e-2  # bf16 arithmetic: visibly rounded, nowhere near wrong
    assert np.isfinite(rel)


def test_its_own_mixed_precision_is_a_run_in_the_requested_dtype():
    """The plugin keeps layers it judges sensitive in f32 under a bf16 hint: a run with most layers in bf16 is a
    bf16 run; one with almost none, or with the hint replaced, is what it computed in."""
    assert computed_dtype(Counter(bfloat16=58, float32=42), "bfloat16", "bf16") == "bfloat16"
    assert computed_dtype(Counter(bfloat16=1, float32=99), "bfloat16", "bf16").startswith("bfloat16 (1 of 100")
    assert computed_dtype(Counter(bfloat16=9, float32=1), "float16", "bf16") != "float16"


@pytest.mark.slow
def test_static_shapes_that_crash_the_plugin_leave_the_cell_judged():
    """OpenVINO 2026.4 dies with SIGSEGV compiling this MLP's pinned static shapes at f32 (bench/upstream/
    openvino_static_mlp.py); the worker no longer dies with it: the cell runs the converter's dims and says so."""
    r = fpdiff.check(str(SPECS / "ov_residual_mlp.py"), backends=["openvino"], precisions=["fp32", "bf16"])
    cells = {c.precision: c for c in r.cells}
    assert cells["fp32"].status == Status.PASS, cells["fp32"].reason
    crash = [f for f in cells["fp32"].findings if f.kind == "compile-crash"]
    if crash:
        assert "SIGSEGV" in crash[0].message and cells["fp32"].info["openvino_shapes"].startswith("as converted")
    assert cells["bf16"].status in (Status.PASS, Status.PRECISION_LOSS)
    if cells["bf16"].info["inference_precision"] == "f32":  # the hint replaced (AVX2): the f32 crash applies too
        assert not crash or cells["bf16"].info["openvino_shapes"].startswith("as converted")
    else:
        assert "openvino_shapes" not in cells["bf16"].info


@pytest.mark.slow
def test_mixed_layers_under_the_hint_are_not_dtype_changed():
    r = fpdiff.check(str(SPECS / "ov_residual_mlp.py"), backends=["openvino"], precisions=["fp16", "bf16"])
    for c in r.cells:
        want = prec.dtype_name(prec.get(c.precision).dtype)
        if c.info["inference_precision"] != {"fp16": "f16", "bf16": "bf16"}[c.precision]:
            continue  # the hint replaced (fp16 on a CPU without it): dtype-changed is the truth there
        assert not [f for f in c.findings if f.kind == "dtype-changed"], (c.precision, c.findings)
        assert c.computed_dtype == want and c.op_dtypes.get(want)
    fp16 = next(c for c in r.cells if c.precision == "fp16")
    if _native_fp16():
        assert fp16.op_dtypes.get("float32")  # a real mix: the plugin kept a layer in f32


def _onnx(path, nodes, x, y, inits):
    from onnx import helper
    graph = helper.make_graph(nodes, path.stem, [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


@pytest.mark.slow
def test_a_float64_onnx_model_runs_the_graph_the_others_run(tmp_path):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    path = _onnx(tmp_path / "f64.onnx", [helper.make_node("MatMul", ["x", "w"], ["m"]),
                                          helper.make_node("Tanh", ["m"], ["y"])],
                 helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 6]),
                 helper.make_tensor_value_info("y", TensorProto.DOUBLE, [3, 4]),
                 [numpy_helper.from_array(rng.standard_normal((6, 4)), "w")])
    r = fpdiff.check(path, backends=["ort", "openvino"], precisions=["fp32"])
    cells = {c.backend: c for c in r.cells}
    assert cells["openvino"].status == Status.PASS, cells["openvino"].reason
    assert cells["openvino"].output_dtypes == cells["ort"].output_dtypes == ["float32"]  # not the float64 source


@pytest.mark.slow
def test_a_graph_with_no_float_arithmetic_is_not_dtype_changed(tmp_path):
    from onnx import TensorProto, helper, numpy_helper
    path = _onnx(tmp_path / "moves.onnx", [helper.make_node("Reshape", ["x", "shape"], ["r"]),
                                            helper.make_node("Gather", ["r", "idx"], ["g"], axis=0),
                                            helper.make_node("Concat", ["g", "r"], ["y"], axis=0)],
                 helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12]),
                 helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 6]),
                 [numpy_helper.from_array(np.array([4, 6], dtype=np.int64), "shape"),
                  numpy_helper.from_array(np.array([2, 0], dtype=np.int64), "idx")])
    r = fpdiff.check(path, backends=["openvino"], precisions=["fp16", "bf16"])
    for c in r.cells:
        assert c.status == Status.PASS and not [f for f in c.findings if f.kind == "dtype-changed"], (c.precision,
                                                                                                   c.findings)



# OpenVINO 2026.4's converter report for a Conv whose input rank it cannot know (a graph with dynamic dims)
REPORT = ("Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report.cpp:151:\n"
          "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted. Failed operations detailed "
          "log:\n-- Conv-15 with a message:\n[ONNX Frontend] Conversion failed for Conv-15\n"
          "While validating ONNX node '<Node(Conv): y>': Check 'data.get_partial_shape().rank().is_static()' failed at "
          "src/frontends/onnx/frontend/src/op/conv.cpp:38:\nFrontEnd API failed with GeneralFailure:\n"
          "The input data tensor's rank has to be known (static)\n\nSummary:\n-- Conversion is failed for: Conv-15\n")


@pytest.mark.parametrize("text, expected", [
    (REPORT, {"Conv-15": "The input data tensor's rank has to be known (static)"}),
    ("Model wasn't fully converted. Failed operations detailed log:\n-- If-13 with a message:\n[ONNX Frontend] "
     "Conversion failed for If-13\nWhile validating ONNX node '<Node(If): 53>': Check 'if_condition_rank.compatible(1)"
     "' failed at src/core/src/op/if.cpp:95:\nWhile validating node 'opset8::If If_64 (...) -> ()' with friendly_name "
     "'If_64':\nRank of If condition input must be equal to 0 or 1\n\nSummary:\n-- Conversion is failed for: If-13\n",
     {"If-13": "Rank of If condition input must be equal to 0 or 1"}),
    ("Model wasn't fully converted.\nSummary:\n-- No conversion rule found for operations: my.Foo, my.Bar\n",
     {"my.Foo": "", "my.Bar": ""}),
])
def test_the_converters_refusal_keeps_its_own_reason(text, expected):
    from fpdiff.backends.openvino import unconverted
    assert unconverted(" ".join(text.split())) == expected


def test_an_if_layer_hiding_its_bodies_is_said_beside_the_count(tmp_path):
    """OpenVINO's runtime model shows an If as one layer (precision u8, its condition's) and hides its branches: the
    cell says its count is of the layers outside them (the count still feeds the dtype rules: a GRU's loop hides its
    body too, and without the count an f16 hint run as bf16 would be a mismatch instead of a substituted format)."""
    import onnx_models as om
    path = tmp_path / "if.onnx"
    onnx.save(om.if_conv(), str(path))
    np.savez(tmp_path / "in.npz", cond=np.array(True),
             x=np.random.default_rng(0).standard_normal((1, 2, 8)).astype(np.float32))
    r = fpdiff.check(str(path), backends=["openvino"], precisions=["fp32", "bf16"], inputs=str(tmp_path / "in.npz"))
    for c in r.cells:
        assert c.status in ("pass", "precision-loss"), (c.precision, c.reason)
        assert "If" in c.info.get("runtime_layers_incomplete", ""), c.info
