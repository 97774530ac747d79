"""A model that cannot answer is not a backend bug: the float64 reference's own spread under rounding-sized
perturbations, and the cells within it called ill-conditioned (judging/conditioning.py)."""
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import fpdiff
from conftest import PLUGINS, SPECS
from fpdiff.core.status import Status, fails
from fpdiff.judging import conditioning as cond

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def spread(rel, worst, tol=1e-5, failed=None):
    return cond.Spread("fp32", 2.0 ** -24, 4, rel, worst, "inputs and weights", tol, 1.0, failed)


def test_perturbation_is_one_rounding_of_floats_and_leaves_integers_alone():
    rng = np.random.default_rng(0)
    a = np.linspace(1, 2, 1000, dtype=np.float32)
    p = cond.perturb_array(a, 2.0 ** -24, rng)
    assert p.dtype == np.float64  # a float32 container would round the fp32-sized change away
    change = np.abs(p / a - 1)
    assert 0 < change.max() <= 2.0 ** -24
    ids = np.arange(10)
    assert cond.perturb_array(ids, 0.1, rng) is not None and (cond.perturb_array(ids, 0.1, rng) == ids).all()


def test_a_scalar_weight_is_perturbed_too():
    """A 0-d float (gemma2's scaling constants) is perturbed like any tensor: it once raised and skipped the whole
    sensitivity check."""
    import torch
    t = torch.tensor(2.0)
    p = cond.perturb_tensor(t, 1e-3, np.random.default_rng(0), keep_dtype=False)
    assert p.shape == () and p.dtype == torch.float64 and 0 < abs(float(p) / 2 - 1) <= 1e-3


def test_rule_needs_an_unattainable_answer_and_a_departure_within_the_factor():
    assert cond.within(1e-3, 1e-3, spread(1e-4, 1e-4))  # 10x the spread, spread over fp32's tolerance
    assert not cond.within(1e-2, 1e-3, spread(1e-4, 1e-4))  # 100x: a departure the model does not explain
    assert not cond.within(1e-3, 1e-2, spread(1e-4, 1e-4))  # the worst element beyond it
    # a well-conditioned model: the reference moves by a few u, under the tolerance, whatever the cell does
    assert not cond.within(3e-7, 3e-7, spread(1e-7, 1e-7))
    assert not cond.within(1e-3, 1e-3, spread(1e-4, 1e-4, failed="the perturbed reference failed"))
    assert not cond.within(float("inf"), 1.0, spread(1.0, 1.0))


def test_ill_conditioned_is_not_a_failure_except_under_strict():
    assert not fails(Status.ILL_CONDITIONED, [])
    assert fails(Status.ILL_CONDITIONED, [], strict=True)


def _graph_with_placeholder_weights():
    """A conv whose weights are a ConstantOfShape fill (as in the ONNX zoo's light models), then Pow and Resize
    whose float constants are an exponent and scales, not weights."""
    shape = numpy_helper.from_array(np.array([4, 3, 1, 1], dtype=np.int64), "w_shape")
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.02])
    two = numpy_helper.from_array(np.array([2.0, 2.0], dtype=np.float32), "two")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")
    bias = numpy_helper.from_array(np.ones(4, dtype=np.float32), "b")
    nodes = [helper.make_node("ConstantOfShape", ["w_shape"], ["w"], value=fill),
             helper.make_node("Conv", ["x", "w", "b"], ["c"]),
             helper.make_node("Pow", ["c", "two"], ["p"]),
             helper.make_node("Resize", ["p", "", "scales"], ["y"], mode="nearest")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4, 4])],
                          [shape, two, scales, bias])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_onnx_weights_perturbed_placeholders_included_exponents_and_scales_not():
    m = _graph_with_placeholder_weights()
    out, n = cond.perturbed_onnx(m, 2.0 ** -11, np.random.default_rng(0))
    onnx.checker.check_model(out, full_check=True)
    inits = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    assert (inits["scales"] == [1, 1, 2, 2]).all() and (inits["w_shape"] == [4, 3, 1, 1]).all()
    assert (inits["two"] == 2).all()  # an exponent: x ** 2.0000001 of a negative x is NaN
    assert not (inits["b"] == 1).all()  # the conv's bias is a weight
    w = next(n for n in out.graph.node if n.output[0] == "w")
    assert w.op_type == "Constant"
    vals = numpy_helper.to_array(w.attribute[0].t)
    assert vals.shape == (4, 3, 1, 1) and len(np.unique(vals)) > 1  # the tie between the filled weights broken
    assert np.abs(vals / np.float32(0.02) - 1).max() <= 2.0 ** -11 * 1.01
    assert n == 2  # the bias and the materialized fill


def test_bounded_reading_names_the_op_and_gives_both_numbers():
    ref = [np.full((4, 8), 5e-6)]
    out = [ref[0] + 1e-7]
    f = cond.bounded_reading(ref, out, ["Sigmoid"], 1e-5, "fp32")
    assert f is not None and f.op == "Sigmoid"
    assert "0.02x relative" in f.message and "1.00e-07 absolute" in f.message
    assert cond.bounded_reading(ref, out, ["MatMul"], 1e-5, "fp32") is None  # no range to read it against


def test_output_ops_look_through_reshapes_in_onnx():
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Flatten", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    assert cond.onnx_output_ops(helper.make_model(g)) == ["Sigmoid"]


# --- real backends ---------------------------------------------------------------------------------------------


def one(result, **match):
    found = [c for c in result.cells if all(getattr(c, k) == v for k, v in match.items())]
    assert len(found) == 1, match
    return found[0]


@pytest.mark.slow
@pytest.mark.skipif(not (LIGHT / "light_squeezenet.onnx").exists(), reason="the onnx wheel's test data")
def test_squeezenet_tied_logits_on_openvino_are_ill_conditioned_with_numbers():
    pytest.importorskip("openvino")
    r = fpdiff.check(str(LIGHT / "light_squeezenet.onnx"), backends=["openvino", "ort"], precisions=["fp32"])
    c = one(r, backend="openvino")
    if c.status == Status.PASS:  # AVX2: the plugin's fp32 sums keep the tie, so there is nothing to condition
        assert c.metrics["rel_l2"] < 1e-5, c.reason
        pytest.skip("the tie holds in this CPU's summation order (AVX2): OpenVINO passes, nothing is ill-conditioned")
    assert c.status == Status.ILL_CONDITIONED, c.reason
    s = c.info["conditioning"]
    assert s["rel_l2"] > 1 and c.metrics["rel_l2"] <= cond.FACTOR * s["rel_l2"]  # the reference moves to one-hot
    assert "the float64 reference itself moves by rel L2" in c.reason and "was mismatch" in c.reason
    assert one(r, backend="ort").status == Status.PASS and "conditioning" not in one(r, backend="ort").info
    assert r.exit_code() == 0 and r.exit_code(strict=True) == 1


@pytest.mark.slow
def test_softmax_over_tied_huge_logits_is_ill_conditioned_for_a_correct_reordering_backend():
    r = fpdiff.check(str(SPECS / "cond_softmax_tied.py"), backends=["cond-reorder"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "cond_reorder.py")])
    c = one(r, backend="cond-reorder")
    assert c.status == Status.ILL_CONDITIONED, c.reason
    assert c.info["conditioning"]["rel_l2"] > 1e-5  # beyond fp32's tolerance: unattainable at fp32


@pytest.mark.slow
def test_real_bug_on_a_well_conditioned_model_stays_mismatch():
    r = fpdiff.check("example:tinyformer", backends=["perturb"], precisions=["fp32"], shape_variants=["static"],
                     plugins=[str(PLUGINS / "perturb.py")])
    c = one(r, backend="perturb")
    assert c.status == Status.MISMATCH
    s = c.info["conditioning"]
    assert s["runs"] == cond.RUNS and s["rel_l2"] < 1e-5  # the model answers at fp32: a few u of movement
    assert c.metrics["rel_l2"] > 100 * s["rel_l2"]
    assert "not the model's sensitivity" in c.reason


@pytest.mark.slow
def test_healthy_backend_on_a_well_conditioned_model_is_never_reconsidered():
    r = fpdiff.check("example:tinyformer", backends=["cond-reorder", "ort"], precisions=["fp32", "fp16"],
                     shape_variants=["static"], plugins=[str(PLUGINS / "cond_reorder.py")])
    for c in r.cells:
        assert c.status in (Status.PASS, Status.PRECISION_LOSS), (c.backend, c.precision, c.status, c.reason)
        assert "conditioning" not in c.info  # no perturbed reference run was spent


@pytest.mark.slow
def test_rare_sigmoid_outputs_on_ort_are_relative_mismatch_absolute_noise_naming_sigmoid():
    r = fpdiff.check(str(SPECS / "cond_sigmoid_rare.py"), backends=["ort", "torch"], precisions=["fp32"])
    c = one(r, backend="ort")
    assert c.status == Status.MISMATCH  # ONNX Runtime's Sigmoid, not the model: the reference barely moves
    assert c.info["conditioning"]["rel_l2"] < 1e-5
    f = [f for f in c.findings if f.kind == "relative-vs-absolute"]
    assert f and f[0].op == "sigmoid", c.findings
    assert "absolute" in f[0].message and "relative" in f[0].message
    assert one(r, backend="torch").status == Status.PASS


def test_a_tiny_probability_beside_an_output_that_passes_still_gets_both_readings():
    """A voice detector's outputs: a probability of 7e-6 that ORT's fp32 Sigmoid gets 9e-4 off relative (6e-9
    absolute), and a recurrent state that agrees. The finding is read on the output that departs."""
    from types import SimpleNamespace

    TP = TensorProto
    g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["p"]), helper.make_node("Relu", ["s"], ["state"])], "g",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [1]),
                           helper.make_tensor_value_info("s", TP.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("p", TP.FLOAT, [1]),
                           helper.make_tensor_value_info("state", TP.FLOAT, [2, 8])])
    source = SimpleNamespace(ref=SimpleNamespace(kind="onnx"), module=helper.make_model(g), tolerance={})
    state = np.linspace(0, 3, 16).reshape(2, 8)
    ref = [np.array([7e-6]), state]
    out = [np.array([7e-6 * (1 + 8.8e-4)]), state * (1 + 1e-8)]
    f = cond.relative_only(source, ref, out, 1e-5, "fp32")
    assert f is not None and f.kind == "relative-vs-absolute" and f.op == "Sigmoid" and "Sigmoid" in f.message, f


def test_an_output_made_by_an_if_is_read_through_its_branches():
    """A wake-word head returns its verifier's Sigmoid or (through Identity) the main Sigmoid from an If: the
    output is a Sigmoid's either way; branches that differ name no op."""
    TP = TensorProto
    then = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["p2"])], "then", [],
                             [helper.make_tensor_value_info("p2", TP.FLOAT, [1])])
    other = helper.make_graph([helper.make_node("Identity", ["p1"], ["p"])], "else", [],
                              [helper.make_tensor_value_info("p", TP.FLOAT, [1])])
    nodes = [helper.make_node("Sigmoid", ["x"], ["p1"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1]),
                                       helper.make_tensor_value_info("c", TP.BOOL, [])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1])])
    assert cond.onnx_output_ops(helper.make_model(g)) == ["Sigmoid"]
    next(a for a in g.node[1].attribute if a.name == "then_branch").g.node[0].op_type = "Tanh"
    assert cond.onnx_output_ops(helper.make_model(g)) == [None]
