"""OpenVINO: ONNX PRelu with a 1-D slope whose length equals both C and W applies it along C, not W. Exit 1: reproduced."""
import sys
import numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper, numpy_helper

slope = np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)  # [4]: ONNX broadcasts it numpy-style, along the last axis
g = helper.make_graph([helper.make_node("PRelu", ["x", "slope"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [2, 4, 3, 4])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [2, 4, 3, 4])], [numpy_helper.from_array(slope, "slope")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]), "prelu.onnx")
x = -np.ones((2, 4, 3, 4), dtype=np.float32)
want = np.where(x < 0, x * slope, x)  # the spec: slope along W
got = ov.Core().compile_model("prelu.onnx", "CPU")(x)[0]
print("spec (along W):", want[0, 0, 0], "\nopenvino:      ", got[0, 0, 0], "(along C:", got[0, :, 0, 0], ")")
sys.exit(int(not np.allclose(want, got)))
