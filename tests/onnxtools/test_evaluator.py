"""A node whose reference-evaluator kernel raises is named in one line: op type, node name, opset, the exception;
a typed StageError of the run stage that carries the node for a one-node repro."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from fpdiff.core.errors import RUN, ReferenceFailed, StageError
from fpdiff.onnxtools.evaluator import COMPONENT, EvaluatorNodeError, evaluator
from fpdiff.onnxtools.graph import float64_ops, float64_values

X = np.random.default_rng(0).standard_normal((1, 2, 8)).astype(np.float32)


def _pool_model(name: str = "pool1", opset: int = 21):
    """Relu then a stride-1 padded MaxPool over [N, C, L]: onnx 1.23's evaluator indexes past its unpadded input
    (IndexError) on this valid graph, which ONNX Runtime runs."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="act"),
             helper.make_node("MaxPool", ["r"], ["y"], name=name, kernel_shape=[3], pads=[1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_the_failing_node_is_named_in_one_line():
    with pytest.raises(EvaluatorNodeError) as info:
        evaluator(_pool_model(), new_ops=float64_ops()).run(None, {"x": X})
    e = info.value
    assert str(e).startswith("the ONNX reference evaluator failed at MaxPool node 'pool1' (opset 21): IndexError: ")
    assert "\n" not in str(e) and isinstance(e.__cause__, IndexError)
    assert isinstance(e, StageError) and (e.stage, e.component, e.op) == (RUN, COMPONENT, "MaxPool")
    assert e.info() == {"op_type": "MaxPool", "node": "pool1", "opset": 21, "domain": "", "outputs": ["y"],
                        "kernel": "onnx.reference.ops._op_common_pool", "error": e.error}


def test_an_unnamed_node_is_named_by_its_output():
    with pytest.raises(EvaluatorNodeError, match=r"at MaxPool node \(unnamed, output 'y'\) \(opset 17\)"):
        evaluator(_pool_model(name="", opset=17)).run(None, {"x": X})


def test_a_failure_in_fpdiffs_own_kernel_says_so():
    """fpdiff's Conv raises where the evaluator's would (channels that do not match the weights): named, and owned."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c1")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8]),
                                            helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(EvaluatorNodeError, match=r"at Conv node 'c1' \(opset 21, fpdiff's kernel\): ValueError"):
        evaluator(model, new_ops=float64_ops()).run(None, {"x": X, "w": np.ones((4, 3, 3), np.float32)})


def test_a_node_inside_a_subgraph_is_named_itself():
    """The evaluator builds a subgraph's evaluator with its own class: the inner node names itself, not the If."""
    inner = _pool_model().graph
    inner.ClearField("input")
    nodes = [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=inner, else_branch=inner)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                           helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(EvaluatorNodeError, match="at MaxPool node 'pool1'"):
        evaluator(model).run(None, {"c": np.array(True), "x": X})


def test_float64_values_names_the_node_and_keeps_refusals_a_usage_error():
    """A kernel that raises: the named error. A kernel that declares it has no implementation for these attributes
    (LayerNormalization's stash_type other than float): fpdiff has no judge for the model, a usage error, named."""
    with pytest.raises(EvaluatorNodeError, match="at MaxPool node 'pool1' \\(opset 21\\): IndexError"):
        float64_values(_pool_model(), {"x": X})
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y"], name="ln", stash_type=TensorProto.DOUBLE)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                                            helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with pytest.raises(ReferenceFailed, match="cannot run this model: .*LayerNormalization node 'ln'.*NotImpl"):
        float64_values(model, {"x": np.ones((2, 4), np.float32), "s": np.ones(4, np.float32)})
