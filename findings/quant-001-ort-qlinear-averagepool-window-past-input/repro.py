"""ONNX Runtime: a QDQ AveragePool whose window runs past the input (kernel 320 over a 2x2 map, ceil_mode=1,
count_include_pad=1, as transformers' EfficientNet pooler exports) is fused into QLinearAveragePool, which gives the
zero point (0.0); the same graph unfused, and the float AveragePool, give the mean of the 4 values."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper, numpy_helper

s, z = numpy_helper.from_array(np.float32(0.01), "s"), numpy_helper.from_array(np.uint8(0), "z")
pool = dict(kernel_shape=[320, 320], strides=[320, 320], pads=[0, 0, 0, 0], ceil_mode=1, count_include_pad=1)
nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
         helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
         helper.make_node("AveragePool", ["xd"], ["p"], **pool),
         helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"]),
         helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["y"])]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [1, 4, 2, 2])],
                      [helper.make_tensor_value_info("y", T.FLOAT, None)], [s, z])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()
x = np.linspace(0.5, 2.0, 16, dtype=np.float32).reshape(1, 4, 2, 2)
want = np.round(x.mean(axis=(2, 3), keepdims=True) / 0.01) * 0.01  # the QDQ graph's own answer
runs = {}
for level in ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL"):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    runs[level] = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    print(level, runs[level].ravel(), "expected", want.ravel())
sys.exit(int(not np.allclose(runs["ORT_ENABLE_ALL"], want, atol=1e-6)))
