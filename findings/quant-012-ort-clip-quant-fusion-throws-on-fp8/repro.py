"""ONNX Runtime's session creation on a float8 e4m3 QDQ graph with a Clip before a QuantizeLinear: its ClipQuantFusion
reads the QuantizeLinear's zero point as an integer and throws on float8 (data type 17)."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper, numpy_helper

s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
z = helper.make_tensor("z", T.FLOAT8E4M3FN, [], [0])
lo, hi = numpy_helper.from_array(np.array(0.0, np.float32), "lo"), numpy_helper.from_array(np.array(6.0, np.float32), "hi")
nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]), helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
         helper.make_node("Clip", ["xd", "lo", "hi"], ["c"]),
         helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"]), helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["y"])]
g = helper.make_graph(nodes, "clip_fp8", [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                      [helper.make_tensor_value_info("y", T.FLOAT, [4])], [s, z, lo, hi])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
onnx.checker.check_model(m)
x = np.array([-1.0, 0.5, 3.0, 9.0], np.float32)
print("onnxruntime", ort.__version__)
off = ort.SessionOptions()
off.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
print("optimizations off:", ort.InferenceSession(m.SerializeToString(), off, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0])
try:
    y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
except Exception as e:  # noqa: BLE001
    print("optimizations on: the session fails:", " ".join(str(e).split())[:200])
    sys.exit(1)
print("optimizations on:", y)
