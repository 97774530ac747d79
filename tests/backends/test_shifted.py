"""Conformance: a plugin that declares every capability a plugin can and shifts each float value it computes by a known
amount (tests/plugins/shifted.py) sees exactly its own numbers in every analysis, never another implementation's
under its name: its error against float64 is the shift, in check, in locate (segment bisection and --mark-all) and in
plan; ranges computes float64 alone and never reports the plugin's numbers."""
import importlib.util
import inspect
import shlex
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import fpdiff
from conftest import PLUGINS
from fpdiff.backends.base import LIFECYCLE
from fpdiff.core.status import Status

pytestmark = pytest.mark.slow  # real workers and backends: make test, not make test-fast

PLUGIN = str(PLUGINS / "shifted.py")
_spec = importlib.util.spec_from_file_location("shifted_plugin", PLUGIN)
shifted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shifted)
SHIFT = shifted.SHIFT
NEAR = 2e-3  # fp16 rounding of the shifted values moves their error this little from the shift (fp32: ~1e-7)


def near(error: float, shift: float = SHIFT) -> bool:
    return error is not None and abs(error - shift) <= NEAR * max(shift, 1e-3)


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory) -> str:
    """A small opset-21 graph: MatMul, Add, Relu, MatMul, Softmax."""
    rng = np.random.default_rng(0)
    w1, b1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (16,), (16, 4)))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["z"]),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TP.FLOAT, [3, 8])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [3, 4])],
                          [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))])
    path = tmp_path_factory.mktemp("shifted") / "mlp.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    return str(path)


def test_the_plugin_declares_every_capability_a_plugin_can():
    from fpdiff.backends import registry
    cls = registry([PLUGIN]).cls("shifted")
    assert cls.kinds == {"torch", "onnx"} and cls.takes_flags and cls.independent and cls.shape_variants
    # every capability but repro and a quantization path (it shifts floats; it quantizes nothing)
    skip = {"repro", "prepare_quantized"}
    assert all(cls.implements(m) for m in LIFECYCLE if m not in skip), [m for m in LIFECYCLE if not cls.implements(m)]


def test_the_users_own_file_on_the_plugin_shows_exactly_its_shift(onnx_model):
    """--artifact reaches a plugin like a built-in: its file's cell is off by exactly the plugin's shift."""
    r = fpdiff.check(str(onnx_model), backends=[], precisions=["fp32"], plugins=[PLUGIN],
                     artifacts=[f"shifted={onnx_model}"], repeat=1)
    c = next(x for x in r.cells if x.backend == "shifted")
    assert c.status == Status.MISMATCH and near(c.metrics["rel_l2"]), (c.status, c.metrics)
    assert c.info["artifact"] == str(Path(onnx_model).resolve())
    # the command that explains it localizes the same file, on the same plugin
    assert r.next == [shlex.join(["fpdiff", "locate", str(onnx_model), "--backend", "shifted", "--precision", "fp32",
                                  "--artifact", str(Path(onnx_model).resolve()), "--plugin", PLUGIN])], r.next


@pytest.mark.parametrize("model,other", [("example:tinycnn", "torch"), ("onnx", "ort")])
def test_check_judges_the_plugins_own_numbers(model, other, onnx_model):
    model = onnx_model if model == "onnx" else model
    r = fpdiff.check(model, backends=[other, "shifted"], precisions=["fp32", "fp16"], plugins=[PLUGIN])
    for c in r.cells:
        if c.backend == "shifted":
            assert c.status == Status.MISMATCH and near(c.metrics["rel_l2"]), (c.precision, c.status, c.metrics)
        else:  # the other implementation of the same cell: its own, unshifted numbers
            assert c.status != Status.MISMATCH and c.metrics["rel_l2"] < 1e-2, (c.backend, c.precision, c.reason)


def test_check_hands_the_plugin_its_flags():
    r = fpdiff.check("example:tinycnn", backends=["shifted"], precisions=["fp32"], plugins=[PLUGIN],
                     backend_flags={"shifted": ["shift=0.25"]})
    assert near(r.cells[0].metrics["rel_l2"], 0.25), r.cells[0].metrics


@pytest.mark.parametrize("model", ["example:tinycnn", "onnx"])
def test_locate_bisection_reports_the_plugins_own_error(model, onnx_model):
    model = onnx_model if model == "onnx" else model
    r = fpdiff.locate(model, backend="shifted", precision="fp32", plugins=[PLUGIN])
    seg = r.segment
    # every segment's outputs are shifted: the first op with a float output is where the plugin departs
    assert seg is not None and seg.status == Status.MISMATCH and seg.end - seg.start == 1, seg
    assert near(seg.rel_l2) and near(r.output_error), (seg.rel_l2, r.output_error)
    assert r.as_dict()["culprit"]["backend"] == "shifted"


def test_locate_hands_the_plugin_its_flags():
    r = fpdiff.locate("example:tinycnn", backend="shifted", precision="fp32", plugins=[PLUGIN],
                      backend_flags={"shifted": ["shift=0.25"]})
    assert near(r.output_error, 0.25) and near(r.segment.rel_l2, 0.25), (r.output_error, r.segment)


@pytest.mark.parametrize("model", ["example:tinycnn", "onnx"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_mark_all_judges_the_plugins_own_marked_values(model, precision, onnx_model):
    """Every marked tensor is the plugin's own (shifted) value: never ONNX Runtime's, never the judge's."""
    model = onnx_model if model == "onnx" else model
    r = fpdiff.locate(model, backend="shifted", precision=precision, plugins=[PLUGIN], mark_all=True)
    found = r.mark_all
    assert found.backend == "shifted" and found.refused is None and found.tensors >= 5
    # a tensor of zeros (a constant) is shifted by 1.0, which no relative error measures: inf against float64's zeros
    zeros = [row for row in found.rows if row.rel_l2 == float("inf") and row.baseline_rel_l2 == 0.0]
    assert all(row.status == Status.MISMATCH for row in found.rows), found.rows
    assert all(near(row.rel_l2) for row in found.rows if row not in zeros), found.rows
    assert len(zeros) < len(found.rows) / 2, zeros
    assert all(row.baseline_rel_l2 is not None and row.baseline_rel_l2 < 1e-2 for row in found.rows)
    assert found.first_departure == found.rows[0] and r.segment.first_op == found.rows[0].op
    assert near(r.output_error)
    assert r.as_dict()["culprit"]["found_by"] == "mark-all" and r.as_dict()["culprit"]["backend"] == "shifted"


@pytest.mark.parametrize("backend", ["shifted", "shifted-jobs"])  # trials in this process (prepare_module), in jobs
def test_plan_trials_are_the_plugins_own_runs(backend):
    """Every trial runs on the plugin: no keep-set removes an error the plugin adds to every output, so nothing
    passes, and the pure precision's error, the all-fp32 error and the autocast remedy's are the shift."""
    r = fpdiff.plan("example:tinycnn", backend=backend, precision="fp16", plugins=[PLUGIN], measure_speed=False)
    assert not r.passed, r.message
    assert near(r.pure_error) and near(r.fp32_error), (r.pure_error, r.fp32_error)
    ran = [t for t in r.trials if t.status == Status.OK]
    assert ran and all(near(t.error) for t in ran), [t.error for t in r.trials]
    assert r.autocast is not None and near(r.autocast.error), r.autocast


def test_ranges_reports_float64_alone():
    """ranges names no backend: its values are the float64 run's (the model's output among them to the last bit),
    and the plugin's output appears nowhere in it."""
    params = set(inspect.signature(fpdiff.ranges).parameters)
    assert not {"backend", "backends"} & params
    r = fpdiff.ranges("example:tinycnn", precisions=["fp16"], **({"plugins": [PLUGIN]} if "plugins" in params else {}))
    src = fpdiff.sources.load("example:tinycnn")
    with torch.no_grad():
        y64 = src.module.double()(*(t.double() for t in src.inputs))
        y32 = src.module.float()(*src.inputs)
    want, theirs = float(y64.abs().max()), float(shifted.shifted(y32, SHIFT).abs().max())
    maxima = [o.max_abs for o in r.ops]
    assert any(abs(m - want) <= 1e-12 * want for m in maxima), (want, maxima[-5:])
    assert not any(abs(m - theirs) <= 1e-3 * theirs for m in maxima), (theirs, maxima[-5:])


def test_a_crash_in_the_marked_run_is_that_answer_and_the_run_goes_on():
    r = fpdiff.locate("example:tinycnn", backend="shifted", precision="fp32", plugins=[PLUGIN], mark_all=True,
                      backend_flags={"shifted": ["crash"]})
    assert r.mark_all.status == Status.CRASH and r.segment.status == Status.CRASH, r.mark_all
    assert r.findings[0].kind == Status.CRASH and "shifted crash" in r.findings[0].message
