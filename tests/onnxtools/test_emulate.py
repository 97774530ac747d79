"""The quantized model's exact float64 emulation, checked against what it emulates: numpy by hand for rounding and
saturation, and ONNX Runtime with its graph optimizations off (which runs each QuantizeLinear, DequantizeLinear,
integer matmul and 4-bit block as the ONNX definition says) on graphs its own quantizer made."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from fpdiff.onnxtools.emulate import emulate, feeds_of, grid_position, marked_quantizers, quantize, unpack_nbits

RNG = np.random.default_rng(1)


def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([0.25, 0.75, 1.25, -0.25, 100.0, -100.0])
    assert quantize(x, 0.5, 0, T.INT8).tolist() == [0, 2, 2, 0, 127, -128]
    assert quantize(x, 0.5, 128, T.UINT8).tolist() == [128, 130, 130, 128, 255, 0]


def test_fp8_saturates_at_448_and_rounds_to_the_nearest_e4m3_value():
    import ml_dtypes
    x = np.array([1000.0, -1000.0, 1.0625, 0.3])
    got = quantize(x, 1.0, 0, T.FLOAT8E4M3FN)
    assert got[0] == 448 and got[1] == -448
    assert got[2:].tolist() == x[2:].astype(ml_dtypes.float8_e4m3fn).astype(np.float64).tolist()
    vals = np.array([0.0, 0.001953125, 1.0, 1.125, 448.0, -1.0, -1.125])
    pos = grid_position(vals, T.FLOAT8E4M3FN)
    assert pos[3] - pos[2] == 1 and pos[5] - pos[6] == 1 and pos[1] - pos[0] == 1


def test_fp8_through_float16_is_a_what_if_that_double_rounds_near_a_midpoint():
    x = np.array([367.99, 232.006, 100.0, 1e5])
    spec = quantize(x, np.float64(1), np.float64(0), T.FLOAT8E4M3FN)
    two = quantize(x, np.float64(1), np.float64(0), T.FLOAT8E4M3FN, via=np.float16)
    assert spec.tolist() == [352, 240, 96, 448] and two.tolist() == [384, 224, 96, 448]  # 1e5: past f16, saturated


def test_a_constant_stored_with_a_scale_of_zero_is_said_zeroed():
    inits = [numpy_helper.from_array(np.array([100, 0], np.int8), "wq"), numpy_helper.from_array(np.float32(0), "s"),
             numpy_helper.from_array(np.int8(0), "z")]
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"]),
                           helper.make_node("Mul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    emu = emulate(m, {"x": np.ones(2, np.float32)})
    assert emu.zeroed == ["wq"] and emu.outputs[0].tolist() == [0.0, 0.0]


def _qdq_matmul(per_channel: bool) -> onnx.ModelProto:
    """x -> Q/DQ (uint8) -> MatMul with an int8 weight (per column or per tensor) -> Q/DQ: the QDQ pattern."""
    w = RNG.standard_normal((16, 8)).astype(np.float32) * np.linspace(0.01, 1, 8, dtype=np.float32)
    ws = (np.abs(w).max(axis=0) / 127).astype(np.float32) if per_channel else np.float32(np.abs(w).max() / 127)
    wq = np.clip(np.round(w / ws), -127, 127).astype(np.int8)
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (np.float32(0.02), "xs"), (np.uint8(128), "xz"), (wq, "wq"), (np.asarray(ws), "ws"),
        (np.zeros(8 if per_channel else (), np.int8), "wz"), (np.float32(0.05), "ys"), (np.uint8(120), "yz")]]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("out", T.FLOAT, [4, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def _ort(model, feeds, optimized=False):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    if not optimized:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.slow
@pytest.mark.parametrize("per_channel", [True, False])
def test_a_qdq_matmul_is_what_onnx_runtime_computes_without_optimizations(per_channel):
    m = _qdq_matmul(per_channel)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    emu = emulate(m, {"x": x})
    (want,) = _ort(m, {"x": x})
    assert emu.steps == [pytest.approx(0.05)]
    assert np.abs(emu.outputs[0] - want).max() / 0.05 <= 1 + 1e-6  # a float32 product may round the other way
    assert np.mean(np.abs(emu.outputs[0] - want) < 1e-5) > 0.95  # float32's rounding of the dequantized output
    assert {a.tensor for a in emu.activations} == {"x", "y"}


@pytest.mark.slow
def test_forced_values_go_downstream_and_each_quantizers_departure_is_kept():
    m = _qdq_matmul(True)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    marked, names = marked_quantizers(m)
    assert names == ["xq", "yq"] and [o.name for o in marked.graph.output] == ["out", "xq", "yq"]
    out, xq, yq = _ort(marked, {"x": x}, optimized=True)
    bad = xq.astype(np.int32)
    bad[0, 0] = min(255, bad[0, 0] + 5)  # a planted departure at the first quantizer
    clean = emulate(m, {"x": x}, forced={"xq": xq, "yq": yq})
    assert [k.tensor for k in clean.local] == ["x", "y"] and all(k.steps <= 1 for k in clean.local)
    assert np.abs(clean.outputs[0] - out).max() < 1e-5  # the backend's own last quantized values, dequantized
    emu = emulate(m, {"x": x}, forced={"xq": bad.astype(np.uint8), "yq": yq})
    first = emu.local[0]
    assert (first.tensor, first.steps, first.off) == ("x", 5.0, 1)


def test_a_forced_emulation_runs_the_float_tail_after_the_last_quantizer_in_float32_too():
    m = _qdq_matmul(True)
    m.graph.node.append(helper.make_node("Sigmoid", ["out"], ["p"]))
    m.graph.output[0].name = "p"
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    yq = np.asarray(RNG.integers(0, 256, (4, 8)), np.uint8)
    emu = emulate(m, {"x": x}, forced={"yq": yq})
    deq = (yq.astype(np.float64) - 120) * np.float64(np.float32(0.05))
    assert np.allclose(emu.outputs[0], 1 / (1 + np.exp(-deq)), rtol=1e-15)
    (tail,) = emu.tail32
    want = 1 / (1 + np.exp(-deq.astype(np.float32)))  # the dequantized values rounded once to float32, then Sigmoid
    assert tail.dtype == np.float32 and np.allclose(tail, want, rtol=1e-6) and not np.array_equal(tail, emu.outputs[0])
    assert emulate(m, {"x": x}).tail32 is None  # nothing read back: no tail of its own


@pytest.mark.slow
def test_onnx_runtimes_dynamic_and_4bit_quantizers_are_emulated_exactly(tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    w = numpy_helper.from_array(RNG.standard_normal((64, 32)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["out"])],
                          "mm", [helper.make_tensor_value_info("x", T.FLOAT, [2, 8, 64])],
                          [helper.make_tensor_value_info("out", T.FLOAT, [2, 8, 32])], [w])
    fp32 = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    onnx.save(fp32, tmp_path / "fp32.onnx")
    quantize_dynamic(str(tmp_path / "fp32.onnx"), str(tmp_path / "dyn.onnx"), weight_type=QuantType.QInt8)
    q4 = MatMulNBitsQuantizer(fp32, block_size=32, is_symmetric=False)
    q4.process()
    x = RNG.standard_normal((2, 8, 64)).astype(np.float32)
    for m in (onnx.load(tmp_path / "dyn.onnx"), q4.model.model):
        ops = {n.op_type for n in m.graph.node}
        assert ops & {"DynamicQuantizeLinear", "MatMulNBits"}
        emu = emulate(m, feeds_of(m, [x]))
        (want,) = _ort(m, {"x": x})
        scale = np.linalg.norm(want)
        assert np.linalg.norm(emu.outputs[0] - want) / scale < 1e-5, ops
        assert emu.quantizers > 0


def test_a_matmulnbits_whose_domain_the_file_does_not_declare_is_emulated():
    # NNCF's compress_weights writes com.microsoft's MatMulNBits with no opset import for that domain
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    w = numpy_helper.from_array(RNG.standard_normal((64, 32)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2, 64])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 32])], [w])
    q4 = MatMulNBitsQuantizer(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), block_size=32,
                              is_symmetric=True)
    q4.process()
    declared = q4.model.model
    undeclared = onnx.ModelProto.FromString(declared.SerializeToString())
    kept = [o for o in undeclared.opset_import if o.domain != "com.microsoft"]
    del undeclared.opset_import[:]
    undeclared.opset_import.extend(kept)
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    want = emulate(declared, feeds_of(declared, [x])).outputs[0]
    assert np.array_equal(emulate(undeclared, feeds_of(undeclared, [x])).outputs[0], want)
    assert len(undeclared.opset_import) == 1  # the caller's model is left as it was


def test_a_value_float_constant_is_widened_like_every_other_float():
    # torch.onnx writes torch.ones(...) as Expand(Constant(value_float=1.0)): left float32, Mul would refuse float64
    g = helper.make_graph([helper.make_node("Constant", [], ["one"], value_float=1.0),
                           helper.make_node("Constant", [], ["shape"], value=numpy_helper.from_array(
                               np.array([2, 1], np.int64))),
                           helper.make_node("Expand", ["one", "shape"], ["ones"]),
                           helper.make_node("Mul", ["x", "ones"], ["y"])], "ones",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    (y,) = emulate(m, feeds_of(m, [x])).outputs
    assert y.dtype == np.float64 and np.array_equal(y, x.astype(np.float64))


def test_an_if_branchs_float_initializer_is_widened_with_the_outer_graph():
    # openWakeWord's models hold float32 initializers inside If branches: Add would meet float64 and refuse it
    def branch(name: str, c: float) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node("Add", ["x", f"{name}_c"], [f"{name}_y"])], name, [],
                                 [helper.make_tensor_value_info(f"{name}_y", T.FLOAT, [2, 4])],
                                 [numpy_helper.from_array(np.full((2, 4), c, np.float32), f"{name}_c")])
    g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                           helper.make_node("Greater", ["s", "zero"], ["pos"]),
                           helper.make_node("If", ["pos"], ["y"], then_branch=branch("then", 0.1),
                                            else_branch=branch("else", -0.1))], "if",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])],
                          [numpy_helper.from_array(np.float32(0), "zero")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    x = np.abs(RNG.standard_normal((2, 4))).astype(np.float32)
    (y,) = emulate(m, feeds_of(m, [x])).outputs
    assert y.dtype == np.float64 and np.array_equal(y, x.astype(np.float64) + np.float64(np.float32(0.1)))


def test_drift_bypass_and_upstream_of_a_two_layer_qdq_graph():
    from fpdiff.onnxtools.emulate import activation_tensors, dequantized, upstream_activations
    s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.uint8), "z")  # the type's lowest: a ReLU folded into the quantizer
    zx = numpy_helper.from_array(np.array(0, np.int8), "zx")  # int8: x keeps its sign
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "zx"], ["xd"]),
             helper.make_node("Neg", ["xd"], ["h"]),
             helper.make_node("QuantizeLinear", ["h", "s", "z"], ["hq"]),
             helper.make_node("DequantizeLinear", ["hq", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", T.FLOAT, [64])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [64])], [s, z, zx])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    x = RNG.standard_normal(64).astype(np.float32)
    assert activation_tensors(m) == ["x", "h"] and dequantized(m) == {"x": "xd", "h": "y"}
    assert upstream_activations(m, ["x", "h"]) == {"x": [], "h": ["x"]}
    ref = {"x": x.astype(np.float64), "h": -x.astype(np.float64)}
    emu = emulate(m, {"x": x}, reference=ref)
    drift = {a.tensor: a.drift for a in emu.activations}
    assert 0 < drift["x"] < 0.05 and drift["h"] > drift["x"]  # h: x's rounding, its own, and the folded ReLU
    kept = emulate(m, {"x": x}, bypass=frozenset({"x", "h"})).outputs[0]
    assert np.allclose(kept, np.maximum(-x.astype(np.float64), 0), rtol=1e-12, atol=0)  # float, the ReLU kept


def test_a_scale_of_inf_is_the_quantized_models_like_a_scale_of_zero():
    # NNCF's scale for an attention mask that reaches float32's lowest: its range over 255 overflows float32
    s = numpy_helper.from_array(np.array(np.inf, np.float32), "s")
    z = numpy_helper.from_array(np.array(-128, np.int8), "z")
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                           helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], "inf",
                          [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [4])], [s, z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    with np.errstate(invalid="ignore"):
        emu = emulate(m, {"x": np.array([-3.4e38, 0, 0, -3.4e38], np.float32)})
    assert emu.zero_scales == ["x"] and not np.all(np.isfinite(emu.outputs[0]))


def test_unpack_nbits_reads_low_nibbles_first_and_blocks_of_values():
    # N=1, K=4, one block of 4: values 1, 2, 3, 4 packed two to a byte, zero point 8 (symmetric), scale 0.5
    b = np.array([[[0x21, 0x43]]], dtype=np.uint8)
    w = unpack_nbits(b, np.array([0.5]), None, 4, 1, 4, 4)
    assert w.tolist() == [[-3.5, -3.0, -2.5, -2.0]]


def test_a_kernels_ops_stop_at_dequantized_values_and_leave_out_shape_arithmetic():
    from fpdiff.onnxtools.emulate import kernel_ops
    m = _qdq_matmul(True)
    shape = numpy_helper.from_array(np.array([4, 8], np.int64), "shape")
    m.graph.initializer.append(shape)
    m.graph.node.insert(3, helper.make_node("Identity", ["shape"], ["shape2"], name="shape_math"))  # constants only
    y = next(n for n in m.graph.node if n.op_type == "MatMul")
    y.output[0] = "mm"
    y.name = "mm_node"
    m.graph.node.insert(5, helper.make_node("Reshape", ["mm", "shape2"], ["y"], name="reshape"))
    m.graph.node.insert(6, helper.make_node("Relu", ["y"], ["yr"], name="relu"))
    next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "y").input[0] = "yr"
    onnx.checker.check_model(m)
    assert kernel_ops(m, ["x", "yr"]) == {"x": [], "yr": ["MatMul mm_node", "Reshape reshape", "Relu relu"]}


@pytest.mark.slow
def test_read_back_keeps_a_backends_values_only_where_its_marked_run_is_the_cell():
    from fpdiff.onnxtools.emulate import read_back
    m = _qdq_matmul(True)
    x = RNG.standard_normal((4, 16)).astype(np.float32)
    (out,) = _ort(m, {"x": x}, optimized=True)
    values = read_back(m, [out], lambda marked: _ort(marked, {"x": x}, optimized=True))
    assert set(values) == {"xq", "yq"} and values["xq"].dtype == np.uint8
    # a marked program whose outputs are not the cell's: its values are another program's, nothing is read
    assert read_back(m, [out + 1], lambda marked: _ort(marked, {"x": x}, optimized=True)) is None


def test_a_scalar_read_back_as_one_element_is_the_same_value():
    """LiteRT hands a 0-d quantized tensor back with shape (1,): the same value, compared squeezed (it was read as
    every value away, a false mismatch); a real shape difference still is."""
    import numpy as np

    from fpdiff.onnxtools.emulate import _Kernels
    k = _Kernels(set(), {})
    k.compare("x", np.array(5.0), np.array([5.0]), 3)
    k.compare("y", np.zeros((2, 3)), np.zeros((3, 2)), 3)
    assert (k.local[0].steps, k.local[0].off) == (0.0, 0)
    assert k.local[1].steps == float("inf")
