"""The quantized cell's rules on readings made by hand: the format's cost is never charged to the backend, the
backend's departure is never hidden in the format's cost, and what comes before any number (nothing quantized, a
quantized model that is itself non-finite)."""
import numpy as np

from fpdiff.core import precision as prec
from fpdiff.core.status import Status
from fpdiff.judging import quantized as q
from fpdiff.judging.cell import Cell
from fpdiff.onnxtools.emulate import Activation, Emulation, Local

INT8 = prec.QUANTIZED["int8"]
RNG = np.random.default_rng(0)
TRUTH = [RNG.standard_normal((4, 64))]


def _cell():
    return Cell("b", "cpu", "int8", "static", Status.OK)


def _emu(loss: float, step: float | None = None, local=None) -> Emulation:
    noise = RNG.standard_normal(TRUTH[0].shape)
    out = TRUTH[0] + noise * loss * np.linalg.norm(TRUTH[0]) / np.linalg.norm(noise)
    return Emulation([out], [step], quantizers=4, local=local or [])


def test_matching_the_emulation_within_tolerance_passes():
    emu = _emu(0.01)
    c = q.judge(_cell(), INT8, TRUTH, emu, emu.outputs)
    assert c.status == Status.PASS and abs(c.metrics["quantization_loss"] - 0.01) < 1e-9
    assert c.metrics["departure"] == 0


def test_a_large_cost_the_backend_matches_is_quantization_loss_not_mismatch():
    emu = _emu(0.3)
    got = [emu.outputs[0] * (1 + 1e-7)]
    c = q.judge(_cell(), INT8, TRUTH, emu, got)
    assert c.status == Status.QUANTIZATION_LOSS and "what int8 costs" in c.reason


def test_departing_from_the_emulation_by_more_than_one_and_a_half_times_the_cost_is_mismatch():
    emu = _emu(0.02)
    noise = RNG.standard_normal(TRUTH[0].shape)
    got = [emu.outputs[0] + noise * 0.04 * np.linalg.norm(TRUTH[0]) / np.linalg.norm(noise)]
    c = q.judge(_cell(), prec.QUANTIZED["int4-weight"], TRUTH, emu, got)
    assert c.status == Status.MISMATCH and "1.5 x the format's own cost" in c.reason
    # 0.72x: what a healthy backend reached, its one-step differences amplified downstream
    amplified = [emu.outputs[0] + noise * 0.0144 * np.linalg.norm(TRUTH[0]) / np.linalg.norm(noise)]
    assert q.judge(_cell(), INT8, TRUTH, emu, amplified).status == Status.PASS


def test_with_kernels_read_back_a_kernel_beyond_one_step_is_named():
    emu = _emu(0.02, step=0.01)
    forced = Emulation(emu.outputs, [0.01], quantizers=4,
                       local=[Local("a", 100, 3, 1.0), Local("b", 100, 40, 3.0), Local("c", 100, 90, 7.0)])
    c = q.judge(_cell(), INT8, TRUTH, emu, emu.outputs, local=forced)
    assert c.status == Status.MISMATCH and "makes b departs" in c.reason and "3 steps" in c.reason


def test_with_kernels_each_within_a_step_a_large_output_departure_still_passes():
    """One-step requantization differences amplified by the model downstream are not the backend's error."""
    emu = _emu(0.02, step=0.01)
    got = [emu.outputs[0] + 0.01]  # one step everywhere at the output: more than half the cost
    forced = Emulation(got, [0.01], quantizers=4, local=[Local("a", 100, 7, 1.0), Local("b", 100, 0, 0.0)])
    c = q.judge(_cell(), INT8, TRUTH, emu, got, local=forced)
    assert c.status == Status.PASS and "within 1 step" in c.reason
    assert c.metrics["kernels_a_step_away"] == 1


def test_outputs_departing_from_the_last_quantized_values_are_mismatch():
    emu = _emu(0.02, step=0.01)
    forced = Emulation(emu.outputs, [0.01], quantizers=4, local=[Local("a", 100, 0, 0.0)])
    got = [emu.outputs[0] + 0.05]  # five steps after the last quantizer
    c = q.judge(_cell(), INT8, TRUTH, emu, got, local=forced)
    assert c.status == Status.MISMATCH and "after the last quantizer" in c.reason


def test_a_float_tail_is_held_to_its_own_float32_baseline_not_only_to_fp32s_tolerance():
    """The float ops after the last quantizer: a healthy backend departs like the judge's own float32 run of them."""
    emu = _emu(0.02)
    base = emu.outputs[0] * (1 + 1e-4 * RNG.standard_normal(emu.outputs[0].shape))  # ill-conditioned in float32
    healthy = [emu.outputs[0] * (1 + 2e-4 * RNG.standard_normal(emu.outputs[0].shape))]
    forced = Emulation(emu.outputs, [None], quantizers=4, local=[Local("a", 100, 0, 0.0)], tail32=[base])
    c = q.judge(_cell(), INT8, TRUTH, emu, healthy, local=forced)
    assert c.status != Status.MISMATCH and 1e-5 < c.metrics["tail_departure"] < c.metrics["tail_limit"]
    wrong = [emu.outputs[0] * (1 + 3e-3 * RNG.standard_normal(emu.outputs[0].shape))]
    c = q.judge(_cell(), INT8, TRUTH, emu, wrong, local=forced)
    # 256 values: check's factor for small outputs
    assert c.status == Status.MISMATCH and "8x the same ops' departure in float32" in c.reason
    without = Emulation(emu.outputs, [None], quantizers=4, local=[Local("a", 100, 0, 0.0)])
    c = q.judge(_cell(), INT8, TRUTH, emu, healthy, local=without)
    assert c.status == Status.MISMATCH and "did not run alone in float32" in c.reason


def test_a_bounded_outputs_tail_departure_gets_both_readings():
    """A sigmoid's tiny probability off by 1.6e-8 absolute: mismatch relative, as check says, with the reading."""
    p = np.array([[7.2552e-5]])
    emu = Emulation([p * 1.001], [None], quantizers=4)
    forced = Emulation([p], [None], quantizers=4, local=[Local("a", 100, 0, 0.0)], tail32=[p * (1 + 1e-7)])
    c = q.judge(_cell(), INT8, [p], emu, [p + 1.61e-8], local=forced, output_ops=["Sigmoid"])
    assert c.status == Status.MISMATCH
    assert [f.kind for f in c.findings if f.kind == "relative-vs-absolute"] == ["relative-vs-absolute"]
    c = q.judge(_cell(), INT8, [p], emu, [p + 1.61e-8], local=forced, output_ops=["Add"])
    assert c.status == Status.MISMATCH and not [f for f in c.findings if f.kind == "relative-vs-absolute"]


def test_fp8_kernels_a_two_step_rounding_explains_are_said_and_the_rest_named():
    spec = Emulation([], [], local=[Local("a", 10, 3, 96.0), Local("b", 10, 1, 27.0), Local("c", 10, 0, 0.0)])
    via16 = Emulation([], [], local=[Local("a", 10, 0, 0.0), Local("b", 10, 1, 27.0), Local("c", 10, 0, 0.0)])
    (f,) = q.double_rounding(spec, via16)
    assert f.kind == "fp8-double-rounding" and f.message.startswith("1 of the 2 kernels") and "(b:" in f.message
    assert q.double_rounding(spec, spec) == []  # explains nothing: no finding


def test_constants_stored_with_a_scale_of_zero_make_a_loss_the_quantizers_error():
    """A BatchNorm weight of all ones gets an fp8 scale of 0 from its spread: the model computes it as 0 (quant-010).
    A loss is then the quantizer's, not the format's; a pass stays a pass, with the finding."""
    emu = _emu(0.9)
    emu.zeroed = ["bn.weight_quantized"]
    c = q.judge(_cell(), INT8, TRUTH, emu, emu.outputs, tool="onnxruntime.quantization")
    assert c.status == Status.ERROR and c.component == "onnxruntime.quantization" and c.stage == "quantize"
    assert "stored 1 constant with a scale of 0" in c.reason and "(bn.weight)" in c.reason and "As judged" in c.reason
    small = _emu(0.01)
    small.zeroed = ["eps"]
    c = q.judge(_cell(), INT8, TRUTH, small, small.outputs, tool="onnxruntime.quantization")
    assert c.status == Status.PASS and [f.kind for f in c.findings] == ["quantizer-zeroed-constants"]


def test_a_quantizer_dropping_relus_from_an_fp8_graph_is_found_and_only_at_fp8():
    fp8 = prec.quantized("fp8")
    f = q.dropped_activations(fp8, {"Relu": 5, "Conv": 6}, {"Conv": 6}, "onnxruntime.quantization")
    assert f.kind == "quantizer-dropped-activations" and "5 of the model's 5 Relu nodes" in f.message
    assert q.dropped_activations(INT8, {"Relu": 5}, {}, "x") is None  # uint8's zero point clamps: legitimate
    assert q.dropped_activations(fp8, {"Relu": 5}, {"Relu": 5}, "x") is None


def test_nothing_quantized_is_unsupported():
    emu = Emulation(TRUTH, [None], quantizers=0)
    c = q.judge(_cell(), INT8, TRUTH, emu, TRUTH, tool="tool x")
    assert c.status == Status.UNSUPPORTED and "tool x quantized none" in c.reason


def test_a_quantized_model_that_is_itself_nonfinite_is_the_quantizers_error():
    emu = Emulation([np.full_like(TRUTH[0], np.nan)], [None], zero_scales=["t1"], quantizers=3)
    c = q.judge(_cell(), INT8, TRUTH, emu, emu.outputs, tool="tool x")
    assert c.status == Status.ERROR and c.component == "tool x" and "a scale of 0 or inf for t1" in c.reason


def test_calibration_findings_name_the_clipping_and_the_coarse_tensors():
    acts = [Activation("x", 1000, 120, 200, (-1.0, 1.0), (-3.0, 2.5)), Activation("y", 1000, 0, 5, (0, 1), (0, 0.9)),
            Activation("z", 1000, 0, 200, (0, 1), (0, 1)), Activation("k", 4, 0, 1, (0, 1), (1, 1))]
    found = q.calibration_findings(acts)
    assert [(f.kind, f.message.split(":")[0]) for f in found] == [("calibration-clips", "x"), ("coarse-scale", "y")]
    assert "120 of 1000" in found[0].message and "[-3, 2.5]" in found[0].message


def test_left_float_and_optimizer_findings_read_the_record():
    rec = {"float_ops": 2, "integer_ops": {"QLinearConv": 3}, "left_float": ["Gemm g", "MatMul m"],
           "optimizer": {"changes_numbers": 0.01, "by": ["PassA"]}}
    (left,) = q.left_float(rec)
    assert left.kind == "left-float" and "2 compute nodes" in left.message and "QLinearConv 3" in left.message
    (opt,) = q.optimizer_finding(rec)
    assert "disabling PassA alone" in opt.message and opt.op == "PassA"
    assert q.optimizer_finding({"optimizer": {"changes_numbers": 0.0}}) == []


def test_an_optimization_that_moves_kernels_but_not_the_outputs_is_said():
    rec = {"optimizer": {"changes_numbers": 0.0, "moves_quantized": {"conv": 2.0, "relu": 7.0},
                         "by_kernels": ["WeightBiasQuantization"]}}
    (opt,) = q.optimizer_finding(rec)
    assert opt.message.startswith("the backend's graph optimizations move 2 quantized tensors")
    assert "first at conv (2 steps), up to 7 at relu" in opt.message and opt.op == "WeightBiasQuantization"
    assert "may move only because its inputs did" in opt.message  # a cascade is not read as seven rewrites
    both = q.optimizer_finding({"optimizer": {**rec["optimizer"], "changes_numbers": 0.01, "by": []}})
    assert "change the outputs by 0.01" in both[0].message and "; they move 2" in both[0].message
    assert both[0].op == "WeightBiasQuantization"


def test_quantized_formats_are_refused_by_the_float_grid_with_a_pointer():
    import pytest

    from fpdiff.core.errors import UsageError
    with pytest.raises(UsageError, match="int8 is a quantized format.*fpdiff quant"):
        prec.get("int8")
    assert prec.named("int4-weight").scheme.group_size == 32 and prec.named("fp16") is prec.FP16
    with pytest.raises(UsageError, match="unknown quantized format 'int3'"):
        prec.quantized("int3")
    assert "weights int8 per-channel symmetric" in INT8.scheme.text()


def test_costs_ranks_by_what_each_layer_added_and_by_what_keeping_it_float_buys():
    a = Activation("a", err2=1.0, ref2=100.0)  # drift 0.1
    b = Activation("b", err2=4.0, ref2=100.0)  # drift 0.2, of which 0.1 arrived from a
    c = Activation("c", err2=0.25, ref2=100.0)  # drift 0.05, nothing upstream
    none = Activation("n")  # no reference: not ranked
    rows = q.costs([a, b, c, none], {"b": ["a"], "a": [], "c": []})
    assert [r["tensor"] for r in rows] == ["a", "b", "c"]
    assert np.isclose(rows[1]["added"], 0.1) and np.isclose(rows[1]["drift"], 0.2)
    measured = q.costs([a, b, c], {"b": ["a"]}, recovered={"a": 0.01, "b": 0.3, "c": -0.001})
    assert [(r["tensor"], r["recovers"]) for r in measured] == [("b", 0.3), ("a", 0.01)]  # c buys nothing


def test_layers_carry_both_readings_and_the_first_kernel_beyond_a_step_is_where_the_backend_departs():
    a = Activation("a", values=10, err2=1.0, ref2=100.0)  # drift 0.1
    b = Activation("b", values=10, err2=4.0, ref2=100.0)  # drift 0.2, 0.1 of it from a
    c = Activation("c", values=10, err2=9.0, ref2=100.0)
    local = Emulation([], [], local=[Local("a", 10, 1, 1.0), Local("b", 10, 4, 3.0), Local("c", 10, 9, 7.0)])
    rows = q.layers([a, b, c], {"b": ["a"], "c": ["b"]}, local, {"b": ["MatMul mm"]}, {"c": 0.02, "a": -0.01})
    assert [r["tensor"] for r in rows] == ["a", "b", "c"] and rows[1]["ops"] == ["MatMul mm"]
    assert np.isclose(rows[1]["added"], 0.1) and rows[0]["steps"] == 1.0
    assert q.departing_layer(rows)["tensor"] == "b"  # the first beyond LOCAL_STEPS, not the largest (c follows it)
    ranked = [r["tensor"] for r in q.hurting_layers(rows)]
    assert ranked[0] == "c" and set(ranked) == {"a", "b", "c"}  # measured recovery first, then what each added
    unread = q.layers([a, b], {}, None, {}, None)
    assert all(r["steps"] is None for r in unread) and q.departing_layer(unread) is None
