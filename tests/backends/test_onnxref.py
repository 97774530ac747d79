"""The ONNX reference evaluator as a backend: a node whose kernel fails makes the cell an error at the run stage that
names the node in its message and in the cell's info; an op the evaluator computes wrong is computed right."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fpdiff.core import precision as prec
from fpdiff.core.status import Status
from fpdiff.model.graph import STATIC
from fpdiff.onnxtools.evaluator import FAILED_NODE
from fpdiff.runtime import jobdata
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import State
from fpdiff.sources import load


def _job(tmp_path, nodes, out_shape, backend: str, precision: str = "fp64"):
    """The cell of a one-input [2, 3, 8] graph of `nodes`, run by a worker as check runs it."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    source = load(str(path))
    data = jobdata.write(tmp_path / "data.pt", inputs=source.inputs, input_names=source.input_names,
                         fingerprint=source.fingerprint)
    return State().run(Job(source.ref, data, backend, prec.get(precision), "cpu", STATIC))


def test_a_failing_node_is_named_in_the_cell(tmp_path):
    """A stride-1 padded MaxPool over [N, C, L]: onnx 1.23's evaluator raises IndexError (ONNX Runtime runs it)."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="act"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool1", kernel_shape=[3], pads=[1, 1])]
    r = _job(tmp_path, nodes, [2, 3, 8], "onnxref")
    assert r.status == Status.ERROR and r.stage == "run" and r.traceback is None
    assert "the ONNX reference evaluator failed at MaxPool node 'pool1' (opset 21): IndexError: " in r.message
    failed = r.info[FAILED_NODE]
    assert (failed["op_type"], failed["node"], failed["opset"], failed["outputs"]) == ("MaxPool", "pool1", 21, ["y"])
    assert onnx.load(failed["graph"]).graph.node[1].name == "pool1"  # the graph the evaluator ran, for a repro


@pytest.mark.parametrize("precision", ["fp64", "fp32", "fp16"])
def test_global_max_pool_over_a_sequence_is_right(tmp_path, precision):
    """[N, C, L] to [N, C, 1]: the evaluator's own kernel gives [N, 1], the max over channels and positions. A max
    is exact, so the judge's float64 value is ONNX Runtime's float32 one (it has no float64 GlobalMaxPool)."""
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'fpdiff[ort]')")
    nodes = [helper.make_node("GlobalMaxPool", ["x"], ["y"], name="gmp")]
    judge = _job(tmp_path, nodes, [2, 3, 1], "onnxref", precision)
    ort = _job(tmp_path, nodes, [2, 3, 1], "ort", "fp32" if precision == "fp64" else precision)
    assert judge.status == ort.status == Status.OK, (judge.message, ort.message)
    assert judge.outputs[0].shape == (2, 3, 1) and np.array_equal(judge.outputs[0], ort.outputs[0])
