"""ONNX Runtime: Sigmoid has an absolute error of ~6e-8, so log(sigmoid(x)) drifts below x = -12 and is -inf from x = -18. Exit 1: reproduced."""
import sys
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto as TP, helper

g = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Log", ["s"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [4])], [helper.make_tensor_value_info("y", TP.FLOAT, [4])])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
x = np.array([-5.0, -13.0, -16.0, -20.0], dtype=np.float32)
sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
got = sess.run(None, {"x": x})[0]
want = -np.log1p(np.exp(-x.astype(np.float64)))  # log(sigmoid(x)) in float64
print("x:                ", x, "\nonnxruntime:      ", got, "\nfloat64 expected: ", want)
rel = np.abs(got - want) / np.abs(want)
print("relative error:   ", rel)
sys.exit(int(not (rel.max() < 1e-5)))
