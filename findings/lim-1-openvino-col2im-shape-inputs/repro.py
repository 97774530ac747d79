"""OpenVINO: convert_model fails on ONNX Col2Im whose image_shape and block_shape are graph inputs ("to_shape was called on a dynamic shape"). Exit 1: reproduced."""
import os, sys, tempfile
import numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper

vi = lambda name, ty, shape: helper.make_tensor_value_info(name, ty, shape)
g = helper.make_graph([helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"])], "g",  # ONNX's test_col2im
                      [vi("x", TP.FLOAT, [1, 5, 5]), vi("image_shape", TP.INT64, [2]), vi("block_shape", TP.INT64, [2])],
                      [vi("y", TP.FLOAT, [1, 1, 5, 5])])
m = os.path.join(tempfile.mkdtemp(), "col2im.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), m)
xs = [np.arange(25, dtype=np.float32).reshape(1, 5, 5), np.array([5, 5]), np.array([1, 5])]
want = xs[0][0].T.astype(np.float64)[None, None]  # 1x5 blocks, stride 1, 5x5 image: column l is image row l
print("expected (float64):       ", want.ravel()[:6], "...\ncompile_model(the file):  ", ov.Core().compile_model(m, "CPU")(xs)[0].ravel()[:6])
try:
    got = ov.Core().compile_model(ov.convert_model(m), "CPU")(xs)[0]
except Exception as e:
    print("convert_model:            ", str(e).strip().splitlines()[-1])
    sys.exit(int("to_shape was called on a dynamic shape" in str(e)))
print("convert_model:            ", got.ravel()[:6])
sys.exit(int(not np.allclose(got, want)))
