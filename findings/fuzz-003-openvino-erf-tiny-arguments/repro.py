"""OpenVINO CPU: fp32 Erf has an absolute error of ~1.5e-7, so erf(8e-6) is 1.4% off and erf(1e-7) is 0. Exit 1: reproduced."""
import math, sys
import numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper

g = helper.make_graph([helper.make_node("Erf", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [4])], [helper.make_tensor_value_info("y", TP.FLOAT, [4])])
model = ov.Core().read_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), b"")
x = np.array([1e-7, 8.14e-6, 1e-4, 0.5], dtype=np.float32)
got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})(x)[0]
want = np.array([math.erf(v) for v in x.astype(np.float64)])  # float64 erf of the same fp32 inputs
print("x:               ", x, "\nopenvino:        ", got, "\nfloat64 expected:", want)
rel = np.abs(got - want) / np.abs(want)
print("relative error:  ", rel)
sys.exit(int(not (rel.max() < 1e-5)))
