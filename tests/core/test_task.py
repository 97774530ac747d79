"""The task backends see (core.task.Task) is what the runtime hands them, for every model kind: a torch model, an ONNX
graph, and a program in either form, which is run as written."""
import copy
import inspect

import onnx
import pytest
import torch

from fpdiff.core import precision as prec
from fpdiff.core import task as contract
from fpdiff.model.graph import STATIC
from fpdiff.runtime import jobdata
from fpdiff.runtime.cache import Cache
from fpdiff.runtime.task import LoadedSource, Task
from fpdiff.sources import SourceRef, load


def members() -> set[str]:
    """Every attribute and method the protocol names."""
    own = {k for k in vars(contract.Task) if not k.startswith("_")}
    return own | set(inspect.get_annotations(contract.Task))


@pytest.fixture(scope="module")
def tinycnn(tmp_path_factory):
    d = tmp_path_factory.mktemp("task")
    source = load("example:tinycnn")
    data = jobdata.write(d / "data.pt", inputs=source.inputs, input_names=source.input_names,
                         fingerprint=source.fingerprint, state=source.module.state_dict())
    return source, data, d


def task(ref: SourceRef, data: str, d, precision: str = "fp16") -> Task:
    return Task(LoadedSource(ref, data, 0), prec.get(precision), "cpu", STATIC, Cache(d / "cache"))


def test_the_runtime_task_has_every_member_of_the_contract(tinycnn):
    source, data, d = tinycnn
    t = task(source.ref, data, d)
    assert isinstance(t, contract.Task)
    assert {"precision", "inputs", "program", "onnx_file", "at", "is_program"} <= members()
    assert all(hasattr(t, m) for m in members())
    assert t.kind == contract.TORCH and t.is_torch and not t.is_program
    assert t.at(prec.get("fp32")).program() is not t.program()  # the same cell at another precision: its own graph
    assert t.requested_dtype == "float16"


def test_a_pt2_program_is_run_as_written(tinycnn):
    source, data, d = tinycnn
    path = d / "program.pt2"
    half = copy.deepcopy(source.module).half()
    torch.export.save(torch.export.export(half, tuple(x.half() for x in source.inputs)), str(path))
    t = task(SourceRef(contract.PROGRAM, str(path), "segment"), data, d, "fp16")
    assert t.is_program and t.is_torch and t.kind == contract.PROGRAM
    assert t.program() is t.at(prec.get("fp32")).program()  # never re-exported at another precision


def test_an_onnx_program_is_handed_over_as_written(tinycnn, tmp_path):
    from fpdiff.onnxtools.mixed import cast_model
    _, data, d = tinycnn
    m = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])]))
    path = tmp_path / "program.onnx"
    onnx.save(cast_model(m, onnx.TensorProto.FLOAT16), str(path))
    t = task(SourceRef(contract.PROGRAM, str(path), "trial"), data, d, "fp32")
    assert t.is_program and not t.is_torch
    assert t.onnx_file() == path and t.onnx_file(judge=True) == path  # not cast to the job's fp32
    with pytest.raises(TypeError, match="no torch program"):
        t.program()
