"""ONNX Runtime's Level 2 rule ReluQuantRewrite removes a Relu followed by a float8 e4m3 QuantizeLinear whose zero point
is 0, as it may before a uint8 QuantizeLinear with zero point 0: but e4m3 is signed, so nothing clamps the negative
values any more. Exits 1 while the bug is there."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

nodes = [h.make_node("QuantizeLinear", ["x", "s", "zp"], ["q0"]),
         h.make_node("DequantizeLinear", ["q0", "s", "zp"], ["d0"]),
         h.make_node("Relu", ["d0"], ["r"]),
         h.make_node("QuantizeLinear", ["r", "s", "zp"], ["q1"]),
         h.make_node("DequantizeLinear", ["q1", "s", "zp"], ["y"])]
graph = h.make_graph(nodes, "relu_fp8", [h.make_tensor_value_info("x", T.FLOAT, [8])],
                     [h.make_tensor_value_info("y", T.FLOAT, [8])],
                     [nh.from_array(np.array(0.05, np.float32), "s"), h.make_tensor("zp", T.FLOAT8E4M3FN, [], [0.0])])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
model.ir_version = 10
onnx.checker.check_model(model)
x = np.linspace(-2, 2, 8).astype(np.float32)


def run(level, disabled=()):
    o = ort.SessionOptions()
    o.graph_optimization_level = level
    s = ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"],
                             disabled_optimizers=list(disabled))
    return s.run(None, {"x": x})[0]


off = run(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
on = run(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
rule_off = run(ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ["ReluQuantRewrite"])
print("onnxruntime", ort.__version__)
print("optimizations off:          ", off)
print("ORT_ENABLE_ALL:             ", on)
print("ENABLE_ALL, ReluQuantRewrite disabled:", rule_off)
sys.exit(1 if (on < 0).any() else 0)
