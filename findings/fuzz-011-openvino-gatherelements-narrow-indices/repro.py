"""OpenVINO: ONNX GatherElements with indices shorter than the data on a non-axis dim is rejected ("not consistent"). Exit 1: reproduced."""
import sys
import numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper

data = np.arange(8, dtype=np.float32).reshape(2, 4, 1)
idx = np.array([[[3]]], dtype=np.int64)  # [1, 1, 1]: dim 0 is 1 where the data has 2 (valid: out[i][j][k] = data[i][idx[i][j][k]][k])
want = np.array([[[data[0, idx[0, 0, 0], 0]]]])  # the ONNX spec's formula: [[[3.]]] (ONNX Runtime and torch.gather agree)
bad = 0
for dshape in ([2, 4, 1], ["a", "b", 1]):  # static: fails in conversion; dynamic: fails at infer()
    g = helper.make_graph([helper.make_node("GatherElements", ["data", "idx"], ["out"], axis=1)], "main",
                          [helper.make_tensor_value_info("data", TP.FLOAT, dshape), helper.make_tensor_value_info("idx", TP.INT64, [1, 1, 1])],
                          [helper.make_tensor_value_info("out", TP.FLOAT, [1, 1, 1])])
    try:
        model = ov.Core().read_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString(), b"")
        got = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})([data, idx])[0]
        bad += not np.array_equal(got, want)
        print(f"data {dshape}: openvino", got.ravel(), "expected", want.ravel())
    except Exception as e:
        bad += "are not consistent" in str(e)
        print(f"data {dshape}: openvino raises:", next((l.strip() for l in str(e).splitlines() if "Shapes" in l), str(e)[-200:]), "| expected", want.ravel())
sys.exit(int(bad > 0))
