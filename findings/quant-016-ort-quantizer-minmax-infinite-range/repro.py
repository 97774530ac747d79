"""ONNX Runtime's static quantizer (int8 QDQ, MinMax) on Where(mask, scores, -inf) -> Softmax: the masked scores get scale inf."""
import sys, tempfile, warnings
import numpy as np, onnx, onnxruntime as ort
from onnx import TensorProto as T, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

warnings.simplefilter("ignore"); rng = np.random.default_rng(0); d = tempfile.mkdtemp()
consts = [numpy_helper.from_array(np.tril(np.ones((1, 4, 4), bool)), "mask"), numpy_helper.from_array(np.array(-np.inf, np.float32), "neg")]
g = helper.make_graph([helper.make_node("Where", ["mask", "x", "neg"], ["s"], name="where"), helper.make_node("Softmax", ["s"], ["y"], name="softmax", axis=-1)],
                      "g", [helper.make_tensor_value_info("x", T.FLOAT, [1, 4, 4])], [helper.make_tensor_value_info("y", T.FLOAT, [1, 4, 4])], consts)
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), f"{d}/m.onnx")
class Reader(CalibrationDataReader):
    def __init__(self): self.it = iter([{"x": rng.standard_normal((1, 4, 4)).astype(np.float32)} for _ in range(4)])
    def get_next(self): return next(self.it, None)
quantize_static(f"{d}/m.onnx", f"{d}/q.onnx", Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                weight_type=QuantType.QInt8, per_channel=True, calibrate_method=CalibrationMethod.MinMax)
q = onnx.load(f"{d}/q.onnx"); init = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}
ql = [n for n in q.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "s"]; scale = init[ql[0].input[1]] if ql else np.float32(1)
print("onnxruntime", ort.__version__, "| QuantizeLinear of the Where output: scale", scale, "zero point", init[ql[0].input[2]] if ql else None)
dq = [n.output[0] for n in q.graph.node if ql and n.op_type == "DequantizeLinear" and n.input[0] == ql[0].output[0]] or ["s"]
q.graph.output.append(helper.make_tensor_value_info(dq[0], T.FLOAT, None)); onnx.save(q, f"{d}/q2.onnx")
x = rng.standard_normal((1, 4, 4)).astype(np.float32)
yf = ort.InferenceSession(f"{d}/m.onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
yq, sq = ort.InferenceSession(f"{d}/q2.onnx", providers=["CPUExecutionProvider"]).run(None, {"x": x})
print("float model  y[0, 3]:", yf[0, 3], "\nquantized    y[0, 3]:", yq[0, 3], "\nquantized Softmax input (dequantized) [0, 3]:", sq[0, 3])
bad = not np.isfinite(scale).all() or np.isnan(sq).any() or np.isnan(yq).any()  # the float model has no NaN: yf is finite
print("relative L2 error of y:", np.linalg.norm(yq - yf) / np.linalg.norm(yf)); print("BUG: non-finite scale, NaN in the quantized model" if bad else "ok")
sys.exit(1 if bad else 0)
