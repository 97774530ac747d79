"""ONNX Runtime's static quantizer at fp8 (QFLOAT8E4M3FN) on MatMul -> Relu -> MatMul: the Relu is removed."""
import sys, tempfile
from pathlib import Path
import numpy as np, onnx
from onnx import TensorProto as T, helper, numpy_helper
import onnxruntime
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
w2 = numpy_helper.from_array(np.eye(8, dtype=np.float32), "w2")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                       helper.make_node("MatMul", ["r", "w2"], ["y"])],
                      "g", [helper.make_tensor_value_info("x", T.FLOAT, [4, 8])], [helper.make_tensor_value_info("y", T.FLOAT, [4, 8])], [w, w2])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])

class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{"x": rng.standard_normal((4, 8)).astype(np.float32)} for _ in range(4)])
    def get_next(self):
        return next(self.it, None)

d = Path(tempfile.mkdtemp())
onnx.save(model, d / "m.onnx")
print("onnxruntime", onnxruntime.__version__)
quantize_static(str(d / "m.onnx"), str(d / "q.onnx"), Reader(), quant_format=QuantFormat.QDQ,
                activation_type=QuantType.QFLOAT8E4M3FN, weight_type=QuantType.QFLOAT8E4M3FN,
                calibrate_method=CalibrationMethod.Distribution)
q = onnx.load(str(d / "q.onnx"))
relus = sum(n.op_type == "Relu" for n in q.graph.node)
x = rng.standard_normal((4, 8)).astype(np.float32)
y = onnxruntime.InferenceSession(str(d / "q.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
print(f"Relu nodes: float model 1, quantized model {relus}; smallest output {y.min():.3g} (a Relu's output is >= 0)")
sys.exit(1 if relus == 0 and y.min() < 0 else 0)
