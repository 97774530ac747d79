"""OpenVINO CPU: ONNX Unsqueeze with axes[1] as a runtime input gets a dynamic output rank and fails to compile ("doesn't support Unsqueeze operation with dynamic rank"). Exit 1: reproduced."""
import os, sys, tempfile
import numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper

vi = lambda name, ty, shape: helper.make_tensor_value_info(name, ty, shape)
g = helper.make_graph([helper.make_node("Unsqueeze", ["x", "axes"], ["y"])], "g",  # axes [1]: the output rank is 4 whatever its value
                      [vi("x", TP.FLOAT, [3, 4, 5]), vi("axes", TP.INT64, [1])], [vi("y", TP.FLOAT, [1, 3, 4, 5])])
m = os.path.join(tempfile.mkdtemp(), "unsqueeze.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)]), m)
x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
want = np.expand_dims(x.astype(np.float64), 0)
model = ov.convert_model(m)
print("converted output shape:", model.output(0).get_partial_shape(), " expected (float64): shape", want.shape)
try:
    got = ov.Core().compile_model(model, "CPU")([x, np.array([0])])[0]
except Exception as e:
    print("compile_model:", next((ln for ln in str(e).splitlines() if "dynamic rank" in ln), str(e)).strip())
    sys.exit(int("with dynamic rank" in str(e)))
print("openvino: shape", got.shape)
sys.exit(int(got.shape != want.shape or not np.allclose(got, want)))
