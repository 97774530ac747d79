"""OpenVINO ONNX frontend: GRU ignores layout=1 (batch first): X [batch 3, seq 1, input 2] is read as 3 steps of 1 sequence, Y_h comes back [1, 1, 6]. Exit 1: reproduced."""
import os, sys, tempfile
import numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper, numpy_helper

rng = np.random.default_rng(0)
x, W, R = rng.standard_normal((3, 1, 2)).astype(np.float32), rng.standard_normal((1, 18, 2)).astype(np.float32), rng.standard_normal((1, 18, 6)).astype(np.float32)
node = helper.make_node("GRU", ["x", "W", "R"], ["Y", "Y_h"], hidden_size=6, layout=1)  # x: [batch 3, seq 1, input 2]
g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [3, 1, 2])],
                      [helper.make_tensor_value_info("Y", TP.FLOAT, None), helper.make_tensor_value_info("Y_h", TP.FLOAT, None)],
                      [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R")])
m = os.path.join(tempfile.mkdtemp(), "gru.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), m)
xd, Wd = x[:, 0].astype(np.float64), W[0].astype(np.float64)  # one step from h0 = 0, no bias: h = (1 - z) * tanh(x Wh^T)
h = (1 - 1 / (1 + np.exp(-xd @ Wd[:6].T))) * np.tanh(xd @ Wd[12:].T)  # [batch, hidden]; Y [batch, seq, dirs, hidden], Y_h [batch, dirs, hidden]
Y, Y_h = ov.Core().compile_model(ov.convert_model(m), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(x).to_tuple()
print("Y_h shape: openvino", Y_h.shape, "expected", (3, 1, 6), "\nY[:, 0, 0, 0] openvino:", Y[:, 0, 0, 0], "expected (float64):", h[:, 0])
sys.exit(int(Y_h.shape != (3, 1, 6) or Y.shape != (3, 1, 1, 6) or not np.allclose(Y.reshape(3, 6), h, atol=1e-5)))
