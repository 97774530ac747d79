"""The opset conversions: a graph to be cast to bfloat16 is brought to opset 22, checked on a witness, or kept at
its own opset with the reason."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from fpdiff.onnxtools.mixed import cast_model, type_error
from fpdiff.sources.opset import BF16_OPSET, ORT_WITNESS, default_opset, for_bfloat16

X = np.random.default_rng(0).standard_normal((1, 2, 8)).astype(np.float32)


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TP.FLOAT, shape)


def _conv_relu(opset: int = 17) -> onnx.ModelProto:
    """Conv + Relu: before opset 22 Conv has no bfloat16, so a bfloat16 cast keeps it float32."""
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((4, 2, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], "conv", pads=[1, 1]),
             helper.make_node("Relu", ["c"], ["y"], "relu")]
    g = helper.make_graph(nodes, "g", [_f32("x", [1, 2, 8])], [_f32("y", [1, 4, 8])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m, full_check=True)
    return m


def _conv_input_type(model: onnx.ModelProto) -> int:
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in list(inferred.graph.value_info)
             + list(inferred.graph.input)}
    types.update({t.name: t.data_type for t in inferred.graph.initializer})
    conv = next(n for n in inferred.graph.node if n.op_type == "Conv")
    return types[conv.input[0]]


def test_a_graph_before_opset_22_is_converted_and_checked_so_its_conv_computes_in_bfloat16():
    m = _conv_relu(17)
    assert _conv_input_type(cast_model(m, TP.BFLOAT16)) == TP.FLOAT  # what the cast made before: Conv in fp32
    new, note = for_bfloat16(m, {"x": X})
    assert default_opset(new) == BF16_OPSET and note["status"] == "converted" and note["opset"] == 17
    assert note["checked_on"] == ORT_WITNESS and note["check_rel_l2"] <= 1e-6
    cast = cast_model(new, TP.BFLOAT16)
    assert type_error(cast) is None and _conv_input_type(cast) == TP.BFLOAT16


def test_a_graph_at_opset_22_is_cast_as_it_is():
    m = _conv_relu(22)
    new, note = for_bfloat16(m, {"x": X})
    assert new is m and note == {"opset": 22}


def test_a_conversion_that_cannot_be_checked_keeps_the_models_own_opset_with_the_reason():
    # an op of the model's own domain: neither ONNX Runtime nor the reference evaluator runs it, so nothing can
    # say the converted graph computes what the model does
    node = helper.make_node("Scale", ["x"], ["y"], domain="example.custom")
    g = helper.make_graph([node], "g", [_f32("x", [1, 2, 8])], [_f32("y", [1, 2, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)])
    new, note = for_bfloat16(m, {"x": X})
    assert new is m and note["status"] == "kept original" and note["converted_to"] == BF16_OPSET
    assert note["reason"].startswith("the conversion could not be checked")


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_backends_read_a_bfloat16_graph_at_opset_22(tmp_path):
    """ONNX Runtime, OpenVINO and IREE load the opset-22 graph a bfloat16 cast is made at (ONNX Runtime's CPU
    provider then refuses its bfloat16 Conv by name: no such kernel, the graph itself is read)."""
    import fpdiff
    path = tmp_path / "conv22.onnx"
    onnx.save(for_bfloat16(_conv_relu(17), {"x": X})[0], str(path))
    np.savez(tmp_path / "x.npz", x=X)
    r = fpdiff.check(str(path), backends=["ort", "openvino", "iree"], precisions=["bf16"],
                     inputs=str(tmp_path / "x.npz"), cache_dir=False, repro_dir=None)
    by = {c.backend: c for c in r.cells}
    assert by["openvino"].status == "pass" and by["iree"].status == "pass"
    assert by["ort"].status == "unsupported" and "implementation for Conv(22)" in by["ort"].reason
