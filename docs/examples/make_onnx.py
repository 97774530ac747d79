"""Writes head.onnx: x[N, 16] -> MatMul -> Add -> Softmax, with a symbolic batch dim N (give it with --shape x=4,16)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w = numpy_helper.from_array(rng.standard_normal((16, 10)).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "b")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["logits"]),
     helper.make_node("Softmax", ["logits"], ["y"], axis=-1)],
    "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], initializer=[w, b])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), "head.onnx")
