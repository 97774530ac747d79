"""OpenVINO CPU: ONNX Tile with repeats as a runtime input returns uninitialized memory for x[2, 2, 2, 2], repeats [1, 2, 2, 2]. Exit 1: reproduced."""
import os, sys, tempfile
import numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper

g = helper.make_graph([helper.make_node("Tile", ["x", "repeats"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [2, 2, 2, 2]), helper.make_tensor_value_info("repeats", TP.INT64, [4])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [2, 4, 4, 4])])
m = os.path.join(tempfile.mkdtemp(), "tile.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), m)
x, repeats = np.arange(16, dtype=np.float32).reshape(2, 2, 2, 2), np.array([1, 2, 2, 2])
want = np.tile(x.astype(np.float64), repeats)
got = ov.Core().compile_model(ov.convert_model(m), "CPU")([x, repeats])[0]
print("expected (float64):", want.ravel()[:8], "\nopenvino:          ", got.ravel()[:8])
print(f"{int((got != want).sum())} of {want.size} elements differ")
sys.exit(int(got.shape != want.shape or not np.array_equal(got, want)))
