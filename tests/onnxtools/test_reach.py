import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from fpdiff.onnxtools.emulate import emulate
from fpdiff.onnxtools.reach import Reach, beyond

K = 2048
SX, SW, SY = 0.1037, 0.0771, 0.25  # scales that are no power of two: float32's dequantized values round


def _fp8_matmul() -> onnx.ModelProto:
    """x -> Q/DQ (e4m3) -> MatMul with an e4m3 weight -> Add -> Identity -> Q/DQ (e4m3): column 0 cancels exactly in
    float64 (its second half is its first half negated, against a repeated x), column 1 does not."""
    half = np.random.default_rng(0).uniform(1, 8, K // 2)
    w = np.stack([np.concatenate([half, -half]), np.full(K, 0.002)], axis=1)
    zero = helper.make_tensor("z", T.FLOAT8E4M3FN, [], [0.0])
    inits = [numpy_helper.from_array(np.float32(v), n) for v, n in [(SX, "sx"), (SW, "sw"), (SY, "sy")]] + [
        zero, numpy_helper.from_array(np.asarray(w / SW).astype(ml_dtypes.float8_e4m3fn), "wq"),
        numpy_helper.from_array(np.array([0.0, 0.25], np.float32), "b")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "z"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["y"]),
             helper.make_node("Identity", ["y"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "sy", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["out"])]
    g = helper.make_graph(nodes, "fp8", [helper.make_tensor_value_info("x", T.FLOAT, [1, K])],
                          [helper.make_tensor_value_info("out", T.FLOAT, [1, 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def _float32_run(m: onnx.ModelProto, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The graph as a healthy float32 kernel computes it: dequantized in float32, summed in order (no pairing)."""
    xq = (x / np.float32(SX)).astype(ml_dtypes.float8_e4m3fn)
    wq = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "wq"))
    xd = xq.astype(np.float32) * np.float32(SX)
    wd = wq.astype(np.float32) * np.float32(SW)
    mm = np.cumsum(xd[0][:, None] * wd, axis=0, dtype=np.float32)[-1][None]
    r = mm + np.array([0.0, 0.25], np.float32)
    return xq, np.clip(r / np.float32(SY), -448, 448).astype(ml_dtypes.float8_e4m3fn)


def test_a_cancelling_kernel_lands_steps_away_yet_within_float32s_reach():
    m = _fp8_matmul()
    x = np.tile(np.random.default_rng(1).uniform(1, 40, K // 2), 2)[None].astype(np.float32)
    xq, yq = _float32_run(m, x)
    emu = emulate(m, {"x": x}, forced={"xq": xq, "yq": yq})
    y = emu.local[1]
    assert y.tensor == "r" and y.steps > 1  # e4m3's grid at 0 is finer than the sum's float32 error
    assert y.beyond is not None and y.beyond <= 1
    assert emu.local[0].beyond == 0.0  # a model input quantized directly: no arithmetic before it


def test_a_departure_far_from_zero_stays_a_departure():
    m = _fp8_matmul()
    x = np.tile(np.random.default_rng(1).uniform(1, 40, K // 2), 2)[None].astype(np.float32)
    xq, yq = _float32_run(m, x)
    bits = yq.view(np.uint8).copy()
    bits[0, 1] += 3  # three e4m3 steps at a value where float32's error is far below one
    emu = emulate(m, {"x": x}, forced={"xq": xq, "yq": bits.view(ml_dtypes.float8_e4m3fn)})
    assert emu.local[1].beyond == pytest.approx(3.0, abs=1)


def test_an_op_without_a_rule_gives_no_reach():
    nodes = [helper.make_node("Softmax", ["x"], ["y"])]
    g = helper.make_graph(nodes, "s", [helper.make_tensor_value_info("x", T.DOUBLE, [2])],
                          [helper.make_tensor_value_info("y", T.DOUBLE, [2])])
    m = helper.make_model(g)
    values = {"x": np.array([1.0, 2.0]), "y": np.array([0.27, 0.73])}
    assert Reach(m, values, lambda i, fed: ()).bound("y") is None
    assert Reach(m, values, lambda i, fed: ()).bound("x") is not None  # a graph input is exact


def test_beyond_counts_the_steps_outside_the_reachable_positions():
    position = np.round  # an integer grid of step 1
    theirs, x = np.array([0.0, 5.0, 9.0]), np.array([0.2, 5.0, 5.0])
    assert beyond(theirs, x, np.array([0.0, 0.0, 1.6]), position) == 2.0  # 9 against at most round(6.6) = 7
    assert beyond(theirs, x, np.array([np.inf, 0.0, 0.0]), position) == 4.0  # an overflowed bound: the raw steps
