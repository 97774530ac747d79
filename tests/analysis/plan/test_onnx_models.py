"""plan on ONNX models: mixed graphs run as written on the named backend in a worker, judged by the float64
reference evaluator."""
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

import fpdiff
from conftest import HERE, PLUGINS
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.onnxtools.export import export_program
from fpdiff.sources import load

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast

PADDED = HERE.parent / "bench" / "specs" / "padded_encoder.py"


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """The padded encoder as ONNX: -3.4e38 mask constant (-inf in fp16, 0*-inf = NaN) and an eps of 1e-8 (0)."""
    d = tmp_path_factory.mktemp("padded")
    s = load(str(PADDED))
    export_program(torch.export.export(s.module, s.inputs, strict=False), d / "m.onnx")
    names = [i.name for i in onnx.load(str(d / "m.onnx")).graph.input]
    np.savez(d / "inputs.npz", **{n: t.numpy() for n, t in zip(names, s.inputs)})
    return d


def test_lost_constants_are_kept_in_fp32_and_the_plan_verified(padded, tmp_path):
    out = tmp_path / "planned.onnx"
    p = fpdiff.plan(str(padded / "m.onnx"), backend="ort", inputs=str(padded / "inputs.npz"), export_onnx=str(out))
    assert p.pure_error == float("inf") and p.passed and p.error <= p.tolerance
    # the cheapest remedy first: the mask fill and the eps moved into fp16's range, no op kept in fp32
    assert [k.op for k in p.keep] == ["clamp constants"] and p.evaluations == 2
    why = " ".join(p.keep[0].why)
    assert "-3.4e+38 -> -6.55e+04" in why and "1e-08 -> 5.96e-08" in why
    assert p.export.verified and onnx.load(str(out)).graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert p.export.backend == "ort" and p.export.error == pytest.approx(p.error)  # the same graph, the same run
    assert [f.name for f in tmp_path.iterdir()] == ["planned.onnx"]  # nothing the verifying run wrote lands beside it


def test_without_the_clamp_the_nodes_reading_lost_constants_are_kept(padded):
    from fpdiff.analysis.plan.jobs import Jobs
    from fpdiff.analysis.plan.onnx_models import CLAMP, OnnxTrials, evidence, float64_run, unit_names
    from fpdiff.analysis.plan.search import Search
    from fpdiff.core.precision import get
    from fpdiff.onnxtools.mixed import named
    m = named(onnx.load(str(padded / "m.onnx")))
    feeds = dict(np.load(padded / "inputs.npz"))
    values = float64_run(m, feeds)
    expected = [values[o.name] for o in m.graph.output]
    names = unit_names(m, values)
    ranked, strong, sources, why = evidence(m, values, get("fp16"), names)
    from fpdiff.analysis.plan.search import Unit
    jobs = Jobs("cpu", (), {}, 300.0, None)
    try:
        trials = OnnxTrials(jobs, "ort", m, feeds, expected, get("fp16"), 1e-2, names)
        found = Search([Unit(n, "") for n in names], trials, 1e-2).run(ranked, strong, sources)
    finally:
        jobs.close()
    ops = {n.name: n.op_type for n in m.graph.node}
    assert CLAMP not in found and sorted(ops[n] for n in found) == ["Add", "Mul"]
    assert any("-inf in fp16" in w for n in found for w in why[n])  # the mask constant


def test_every_op_kept_is_fp32_again(padded):
    import onnxruntime as ort

    from fpdiff.analysis.plan.onnx_models import float64_run, follow_moves, unit_names
    from fpdiff.onnxtools.mixed import named, to_mixed
    m = named(onnx.load(str(padded / "m.onnx")))
    feeds = dict(np.load(padded / "inputs.npz"))
    values = float64_run(m, feeds)
    exp = values[m.graph.output[0].name]
    mixed = to_mixed(m, TensorProto.FLOAT16, follow_moves(m, set(unit_names(m, values))))
    out = ort.InferenceSession(mixed.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.linalg.norm(out - exp) / np.linalg.norm(exp) < 1e-5  # Transposes of weights and kept ops stay fp32
    without = to_mixed(m, TensorProto.FLOAT16, set(unit_names(m, values)))
    out = ort.InferenceSession(without.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.linalg.norm(out - exp) / np.linalg.norm(exp) > 1e-5  # what following the moves is for


def test_other_backends_and_foreign_plans_are_refused(padded, tmp_path):
    with pytest.raises(UsageError, match="inductor does not run onnx models.*backends that do: .*openvino"):
        fpdiff.plan(str(padded / "m.onnx"), backend="inductor", inputs=str(padded / "inputs.npz"))
    path = tmp_path / "plan.json"
    fpdiff.plan("example:rmsnorm", save=str(path), measure_speed=False)
    with pytest.raises(UsageError, match="made for example:rmsnorm"):
        fpdiff.plan(str(padded / "m.onnx"), backend="ort", inputs=str(padded / "inputs.npz"), load=str(path))


def test_openvino_verifies_its_own_plan(padded, tmp_path):
    """Trials, the speed figure and the export's verification all run on OpenVINO, not ONNX Runtime."""
    out = tmp_path / "planned.onnx"
    p = fpdiff.plan(str(padded / "m.onnx"), backend="openvino", inputs=str(padded / "inputs.npz"),
                    export_onnx=str(out))
    assert p.backend == "openvino" and all(t.status == Status.OK for t in p.trials)
    assert p.passed and p.error <= p.tolerance
    assert p.speed.where == "openvino cpu" and set(p.speed.ms) == {"fp32", "fp16", "plan"}
    assert p.export.verified and p.export.backend == "openvino"


def test_every_onnx_trial_is_the_named_backends_own(padded):
    """A plugin that shifts its outputs by a known relative L2 sees exactly that shift in the trial that keeps every
    op in fp32, and in the verified plan: its numbers, not ONNX Runtime's."""
    shift = 0.125
    p = fpdiff.plan(str(padded / "m.onnx"), backend="shifted", plugins=(str(PLUGINS / "shifted.py"),),
                    backend_flags={"shifted": [f"shift={shift}"]}, inputs=str(padded / "inputs.npz"), tolerance=0.2)
    assert p.passed and p.error == pytest.approx(shift, rel=2e-2) and p.speed.where == "shifted cpu"
    assert all(t.error >= shift * 0.98 for t in p.trials)  # no trial ran anywhere else


def test_onnxref_runs_plan_trials_too(padded):
    p = fpdiff.plan(str(padded / "m.onnx"), backend="onnxref", inputs=str(padded / "inputs.npz"), measure_speed=False)
    assert p.backend == "onnxref" and all(t.status == Status.OK for t in p.trials) and p.passed
