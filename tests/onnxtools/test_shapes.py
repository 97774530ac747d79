"""A static cell's ONNX graph has every dim pinned; a dynamic cell's is the graph as written."""
import onnx
from onnx import TensorProto as TP
from onnx import helper

from fpdiff.onnxtools.shapes import pin_dims, symbolic_dims
from onnx_models import symbolic_conv as _conv_model


def _dims(vi):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def test_symbolic_dims_are_named_by_dim_param_or_by_input_and_axis():
    assert symbolic_dims(_conv_model()) == {"x": {0: "N", 2: "L"}, "b": {0: "b_0"}}


def test_pinning_every_dim_fixes_inputs_value_info_and_outputs():
    m = pin_dims(_conv_model(), {"x": (4, 2, 7), "b": (4, 3)})
    onnx.checker.check_model(m, full_check=True)
    assert [_dims(v) for v in m.graph.input] == [[4, 2, 7], [4, 3]]
    assert _dims(m.graph.value_info[0]) == [4, 3, 7]
    assert _dims(m.graph.output[0]) == [4, 3]
    assert symbolic_dims(m) == {}


def test_a_kept_dim_stays_symbolic_everywhere_and_the_source_is_untouched():
    src = _conv_model()
    m = pin_dims(src, {"x": (4, 2, 7), "b": (4, 3)}, keep={"L"})
    assert _dims(m.graph.input[0]) == [4, 2, "L"]
    assert _dims(m.graph.value_info[0]) == [4, 3, "L"]
    assert symbolic_dims(src) == {"x": {0: "N", 2: "L"}, "b": {0: "b_0"}}


def test_dims_inside_subgraphs_are_pinned_too():
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TP.FLOAT, ["N", 2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TP.FLOAT, ["N", 2])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
                          [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 2]),
                           helper.make_tensor_value_info("c", TP.BOOL, [])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, ["N", 2])])
    m = pin_dims(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), {"x": (5, 2), "c": ()})
    sub = m.graph.node[0].attribute
    assert {a.name: _dims(a.g.output[0]) for a in sub} == {"then_branch": [5, 2], "else_branch": [5, 2]}
