"""plan on ONNX models: mixed graphs run as written on the named backend in a worker, judged by the float64
reference evaluator."""
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

import fpdiff
from conftest import HERE, PLUGINS
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.onnxtools.export import export_program
from fpdiff.sources import load

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast

PADDED = HERE.parent / "bench" / "specs" / "padded_encoder.py"


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    """A LayerNorm-like block on x*150: the squared deviations reach 3e5 (inf in fp16) and the variance reads them;
    beside it x - 0.999x, whose rounding in fp16 costs 50% (the search's work). ONNX Runtime's CPU provider runs
    every node of it in float32 behind inserted casts."""
    from onnx import helper as h
    from onnx import numpy_helper as nh
    d = tmp_path_factory.mktemp("scaled")
    consts = {"k": 150.0, "eps": 1e-5, "near": 0.999, "up": 1000.0}
    inits = [nh.from_array(np.array(v, np.float32), n) for n, v in consts.items()]
    inits.append(nh.from_array(np.array([-1], np.int64), "ax"))
    nodes = [h.make_node("Mul", ["x", "k"], ["a"], name="scale"),
             h.make_node("ReduceMean", ["a", "ax"], ["m"], name="mean"),
             h.make_node("Sub", ["a", "m"], ["d"], name="center"),
             h.make_node("Mul", ["d", "d"], ["d2"], name="square"),
             h.make_node("ReduceMean", ["d2", "ax"], ["v"], name="var"),
             h.make_node("Add", ["v", "eps"], ["ve"], name="addeps"),
             h.make_node("Sqrt", ["ve"], ["s"], name="std"),
             h.make_node("Div", ["d", "s"], ["n"], name="norm"),
             h.make_node("Mul", ["x", "near"], ["c"], name="shrink"),
             h.make_node("Sub", ["x", "c"], ["r"], name="cancel"),
             h.make_node("Mul", ["r", "up"], ["ru"], name="enlarge"),
             h.make_node("Add", ["n", "ru"], ["y"], name="residual")]
    io = [h.make_tensor_value_info(n, TensorProto.FLOAT, [8, 64]) for n in ("x", "y")]
    onnx.save(h.make_model(h.make_graph(nodes, "scaled", io[:1], io[1:], inits),
                           opset_imports=[h.make_opsetid("", 18)]), d / "m.onnx")
    np.savez(d / "inputs.npz", x=np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32))
    return d


@pytest.fixture(scope="module")
def scaled_plan(scaled, tmp_path_factory):
    path = tmp_path_factory.mktemp("scaled-plan") / "plan.json"
    p = fpdiff.plan(str(scaled / "m.onnx"), backend="ort", inputs=str(scaled / "inputs.npz"), save=str(path),
                    measure_speed=False)
    return p, path


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


def test_a_value_beyond_fp16_is_read_in_fp32_and_the_plan_verified_in_real_fp16(scaled, scaled_plan):
    """ORT's CPU provider computes fp16 in float32, so its trials alone would pass a plan that sends 3e5 into fp16:
    the variance reading it is kept before the search, and every passing keep-set runs again on the reference
    evaluator in fp16; the saved plan then meets the tolerance where fp16 is computed, on onnxref and IREE."""
    p, path = scaled_plan
    v = p.verification
    assert p.passed and v.backend == "onnxref" and "ran 0 of 12 float ops in float16" in v.wider
    why = {k.node: " ".join(k.why) for k in p.keep}
    assert "reads d2 up to 3" in why["var"] and "makes d2 up to 3" in why["square"]
    assert {"shrink", "cancel"} <= set(why)  # what real fp16 needs beyond them (ort's float32 passes with shrink)
    assert p.error <= p.tolerance and v.error <= p.tolerance and v.pure_error is None  # pure fails on ort already
    for backend in ("onnxref", "iree"):  # both compute fp16 themselves: no second verifier
        q = fpdiff.plan(str(scaled / "m.onnx"), backend=backend, inputs=str(scaled / "inputs.npz"), load=str(path),
                        measure_speed=False)
        assert q.passed and q.error <= q.tolerance and q.verification is None, backend


def test_a_plan_only_float32_arithmetic_passes_is_refused(scaled, scaled_plan, tmp_path, capsys):
    """The defect: the plan ORT alone verified (keep x*0.999 in fp32: 1.3e-5 on ort) is 54% off in real fp16."""
    import json

    from fpdiff.cli import main
    d = json.loads(scaled_plan[1].read_text())
    d["keep"] = [k for k in d["keep"] if k["node"] == "shrink"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d))
    args = [str(scaled / "m.onnx"), "--backend", "ort", "--inputs", str(scaled / "inputs.npz"), "--load", str(path),
            "--no-speed", "--no-store"]
    q = fpdiff.plan(args[0], backend="ort", inputs=args[4], load=str(path), measure_speed=False)
    assert q.error <= q.tolerance and not q.passed and q.verification.error > 0.5
    assert q.message.startswith("fails in real fp16 on onnxref: error 0.5")
    assert main(["plan", *args]) == 1
    out = capsys.readouterr().out
    assert "ort computes fp16 wider: ort ran 0 of 12 float ops in float16; 12 in float32" in " ".join(out.split())
    assert "no plan: fails in real fp16 on onnxref" in out


def test_values_from_constants_the_format_cannot_hold_force_nothing(padded):
    """A -3.4e38 mask fill spreads -3.4e38 through the scores, but it is the lost constant's (clamped, or -inf in
    fp16 as a -inf fill is): the overflow rule reads the values with small constants clamped into range."""
    from fpdiff.analysis.plan.onnx_models import float64_run, unit_names
    from fpdiff.analysis.ranges import onnx_overflows, overflows
    from fpdiff.onnxtools.mixed import named
    m = named(onnx.load(str(padded / "m.onnx")))
    feeds = dict(np.load(padded / "inputs.npz"))
    values = float64_run(m, feeds)
    names = unit_names(m, values)
    assert overflows([(n.name, n.input, n.output) for n in m.graph.node if n.name in names], values, prec.FP16)
    assert onnx_overflows(m, feeds, values, prec.FP16, names) == {}


def test_the_overflow_rule_is_fp16s_rounding_to_inf():
    """65519 rounds to 65504 in fp16 and 65520 to inf; an inf a value already holds is the format's too."""
    from fpdiff.analysis.ranges import overflows
    values = {"a": np.array([65519.0]), "b": np.array([-65520.0, 1.0]), "c": np.array([np.inf, 3.0])}
    found = overflows([("f", ["a", "c"], ["b"]), ("g", ["b"], ["x"]), ("h", ["c"], [])], values, prec.FP16)
    assert found == {"f": ["makes b up to 6.55e+04 (inf in fp16)"], "g": ["reads b up to 6.55e+04 (inf in fp16)"]}
    assert overflows([("f", ["b"], [])], values, prec.BF16) == {}  # bf16 holds 3.4e38


@pytest.fixture(scope="module")
def tiny_consts(tmp_path_factory):
    """y = x / (|x| + 1e-10) + Clip(x * 1e10, -3e38, 3e38) * 1e-5 on |x| ~ 1e-6: the eps matters against x (6e-8,
    fp16's smallest subnormal, moves the quotient by 5%) and the Clip bounds against x * 1e10 (65504 would cut it)."""
    from onnx import helper, numpy_helper
    d = tmp_path_factory.mktemp("tiny_consts")
    c = {k: numpy_helper.from_array(np.array(v, np.float32), k)
         for k, v in {"eps": 1e-10, "big": 1e10, "lo": -3e38, "hi": 3e38, "small": 1e-5}.items()}
    nodes = [helper.make_node("Abs", ["x"], ["a"], "abs"), helper.make_node("Add", ["a", "eps"], ["d"], "add_eps"),
             helper.make_node("Div", ["x", "d"], ["r"], "div"), helper.make_node("Mul", ["x", "big"], ["s"], "scale"),
             helper.make_node("Clip", ["s", "lo", "hi"], ["cl"], "clip"),
             helper.make_node("Mul", ["cl", "small"], ["m"], "shrink"),
             helper.make_node("Add", ["r", "m"], ["y"], "sum")]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [64]) for n in ("x", "y")]
    model = helper.make_model(helper.make_graph(nodes, "g", vi[:1], vi[1:], list(c.values())),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(d / "m.onnx"))
    rng = np.random.default_rng(0)
    x = (rng.choice([-1.0, 1.0], 64) * rng.uniform(2e-7, 1e-5, 64)).astype(np.float32)
    np.savez(d / "inputs.npz", x=x)
    return d


def test_every_op_in_fp32_is_the_models_own_fp32_graph_with_the_clamp_too(tiny_consts):
    """The bound plan reports as "every op in fp32" is the keep-set of every unit, clamp-constants among them: the
    clamp moves only the copies ops computing in fp16 read, so every op kept reads the model's own constants."""
    import onnxruntime as ort
    from onnx import numpy_helper

    from fpdiff.analysis.plan.onnx_models import CLAMP, OnnxTrials, float64_run, unit_names
    from fpdiff.core.precision import get
    from fpdiff.onnxtools.mixed import named
    m = named(onnx.load(str(tiny_consts / "m.onnx")))
    feeds = dict(np.load(tiny_consts / "inputs.npz"))
    values = float64_run(m, feeds)
    names = unit_names(m, values)
    trials = OnnxTrials(None, "ort", m, feeds, [values["y"]], get("fp16"), 1e-3, names)
    assert set(trials.clamped) == {"eps: 1e-10 -> 5.96e-08", "big: 1e+10 -> 6.55e+04", "lo: -3e+38 -> -6.55e+04",
                                   "hi: 3e+38 -> 6.55e+04"}

    def run(model) -> np.ndarray:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(run(trials.build(set(names) | {CLAMP})), run(m))
    low = trials.build({CLAMP})  # nothing kept: every constant read in fp16, each clamped into its range
    held = {t.name: float(numpy_helper.to_array(t)) for t in low.graph.initializer}
    assert held["eps"] == 2 ** -24 and held["hi"] == 65504.0


def test_plan_meets_a_tolerance_only_fp32_meets_by_keeping_every_op(tiny_consts):
    """With the clamp in the bound its every-op-in-fp32 trial was 5% off the model, and plan said no plan."""
    p = fpdiff.plan(str(tiny_consts / "m.onnx"), backend="ort", inputs=str(tiny_consts / "inputs.npz"),
                    tolerance=1e-6, measure_speed=False)
    assert p.fp32_error is not None and p.fp32_error < 1e-6 and p.passed
