"""ONNX Runtime's static quantizer at fp8 (QFLOAT8E4M3FN) on MatMul -> Add of an all-zero bias (a fresh Linear's)."""
import sys, tempfile
from pathlib import Path
import numpy as np, onnx
from onnx import TensorProto as T, helper, numpy_helper
import onnxruntime
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
b = numpy_helper.from_array(np.zeros(8, np.float32), "b")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
                      "g", [helper.make_tensor_value_info("x", T.FLOAT, [4, 8])], [helper.make_tensor_value_info("y", T.FLOAT, [4, 8])], [w, b])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])

class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{"x": rng.standard_normal((4, 8)).astype(np.float32)} for _ in range(4)])
    def get_next(self):
        return next(self.it, None)

d = Path(tempfile.mkdtemp())
onnx.save(model, d / "m.onnx")
print("onnxruntime", onnxruntime.__version__)
try:
    quantize_static(str(d / "m.onnx"), str(d / "q.onnx"), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QFLOAT8E4M3FN, weight_type=QuantType.QFLOAT8E4M3FN,
                    calibrate_method=CalibrationMethod.Distribution)
except ValueError as e:
    print("quantize_static fails:", e.__class__.__name__, str(e)[:80])
    sys.exit(1)
print("quantized")
