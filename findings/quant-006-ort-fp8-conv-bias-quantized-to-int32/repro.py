"""ONNX Runtime's Level 1 transformer WeightBiasQuantization rewrites a float Conv bias in a float8 e4m3 QDQ node
unit to int32 at the scale input_scale * weight_scale, as for an integer kernel: but no integer kernel runs at fp8,
and the bias is rounded to that grid. Where it is coarser than e4m3's grid near zero, the Conv's outputs move by
whole e4m3 steps. Exits 1 while the rewrite changes the numbers."""
import sys

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

S = 0.01  # every scale: input, weight and output (input * weight: 1e-4, the int32 bias's step)
bias = np.array([4e-5, 1.2e-4, -7e-5, 0.3], np.float32)
w = np.full((4, 1, 1, 1), 0.5, np.float32)
nodes = [h.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"]),
         h.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"]),
         h.make_node("DequantizeLinear", ["wq", "s", "zp"], ["wd"]),
         h.make_node("Conv", ["xd", "wd", "b"], ["c"]),
         h.make_node("QuantizeLinear", ["c", "s", "zp"], ["yq"]),
         h.make_node("DequantizeLinear", ["yq", "s", "zp"], ["y"])]
graph = h.make_graph(nodes, "conv_fp8", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 1, 1])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 1, 1])],
                     [nh.from_array(np.array(S, np.float32), "s"), h.make_tensor("zp", T.FLOAT8E4M3FN, [], [0.0]),
                      h.make_tensor("wq", T.FLOAT8E4M3FN, [4, 1, 1, 1], (w / S).ravel().tolist()),
                      nh.from_array(bias, "b")])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
model.ir_version = 10
onnx.checker.check_model(model)
x = np.zeros((1, 1, 1, 1), np.float32)  # the Conv's output is its bias


def run(level, disabled=()):
    o = ort.SessionOptions()
    o.graph_optimization_level = level
    s = ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"],
                             disabled_optimizers=list(disabled))
    return s.run(None, {"x": x})[0].ravel()


def position(v):
    """e4m3 grid positions of v / S, so a difference counts steps."""
    b = (v.astype(np.float64) / S).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(int)
    return np.where(b & 0x80, -(b & 0x7F), b & 0x7F)


def main() -> int:
    off = run(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    on = run(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    rule_off = run(ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ["WeightBiasQuantization"])
    print("onnxruntime", ort.__version__)
    print("the bias (what the model says):          ", bias)
    print("optimizations off:                       ", off)
    print("ORT_ENABLE_ALL:                          ", on)
    print("ENABLE_ALL, WeightBiasQuantization off:  ", rule_off)
    print("e4m3 steps moved by the rewrite:         ", np.abs(position(on) - position(off)))
    return 1 if np.any(position(on) != position(off)) else 0


if __name__ == "__main__":
    sys.exit(main())
