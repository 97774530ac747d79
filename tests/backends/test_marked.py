"""prepare_marked: ONNX Runtime and the ONNX reference evaluator hand back every float value of the cell's graph, named
in graph order, at the cell's precision; a backend that cannot mark says so in one line."""
import numpy as np
import onnx
import pytest
import torch

from fpdiff.core import precision as prec
from fpdiff.core.status import Status
from fpdiff.model.graph import STATIC
from fpdiff.runtime import jobdata
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import State
from fpdiff.sources import SourceRef, load

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install 'fpdiff[ort]')")


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """(the ONNX file, its float values in graph order, the job data) of a small MLP."""
    d = tmp_path_factory.mktemp("mlp")
    path = d / "mlp.onnx"
    torch.manual_seed(0)
    torch.onnx.export(Mlp().eval(), (torch.randn(2, 8),), str(path), dynamo=False, input_names=["x"])
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    names = [o for n in model.graph.node for o in n.output]
    source = load(str(path))
    data = jobdata.write(d / "data.pt", inputs=source.inputs, input_names=source.input_names,
                         fingerprint=source.fingerprint)
    return source.ref, names, data


def run(ref: SourceRef, data: str, backend: str, precision: str = "fp32", mode: str = "marked"):
    return State().run(Job(ref, data, backend, prec.get(precision), "cpu", STATIC, mode=mode))


@pytest.mark.parametrize("backend", ["ort", "onnxref"])
def test_every_float_value_comes_back_named_in_graph_order(mlp, backend):
    ref, names, data = mlp
    r = run(ref, data, backend)
    assert r.status == Status.OK, r.message
    assert r.output_names == names and len(r.outputs) == len(names)  # Gemm, Relu, Gemm: every one a float value
    cell = run(ref, data, backend, mode="cell")
    np.testing.assert_allclose(r.outputs[-1], cell.outputs[0], rtol=1e-6)  # the last value is the model's output


def test_the_marked_graph_is_at_the_cells_precision(mlp):
    ref, _, data = mlp
    r = run(ref, data, "ort", "fp64")
    assert r.status == Status.OK, r.message
    assert r.output_dtypes == ["float64"] * len(r.outputs)


def test_ort_and_the_evaluator_agree_value_by_value(mlp):
    ref, names, data = mlp
    a, b = run(ref, data, "ort"), run(ref, data, "onnxref")
    assert a.output_names == b.output_names == names
    for x, y in zip(a.outputs, b.outputs):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def test_an_onnx_program_is_marked_as_written(mlp, tmp_path):
    """A program already at its precision (a mixed trial): a graph in float16 stays float16, never cast."""
    from fpdiff.onnxtools.mixed import cast_model
    ref, names, data = mlp
    path = tmp_path / "program.onnx"
    onnx.save(cast_model(onnx.load(ref.path), onnx.TensorProto.FLOAT16), str(path))
    r = run(SourceRef("program", str(path), "trial"), data, "ort", "fp16")
    assert r.status == Status.OK, r.message
    assert r.output_names == names and set(r.output_dtypes) == {"float16"}


def test_a_backend_that_cannot_mark_says_so(mlp):
    ref, _, data = mlp
    r = run(ref, data, "iree")
    assert r.status == Status.UNSUPPORTED and "cannot mark every intermediate" in r.message


@pytest.fixture(scope="module")
def tinycnn(tmp_path_factory):
    source = load("example:tinycnn")
    data = jobdata.write(tmp_path_factory.mktemp("tinycnn") / "data.pt", inputs=source.inputs,
                         input_names=source.input_names, fingerprint=source.fingerprint,
                         state=source.module.state_dict())
    return source.ref, data


def test_a_torch_model_is_marked_on_the_export_its_cell_runs(tinycnn):
    ref, data = tinycnn
    r, cell = run(ref, data, "ort"), run(ref, data, "ort", mode="cell")
    assert r.status == Status.OK, r.message
    assert len(r.output_names) > 5 and len(set(r.output_names)) == len(r.output_names)
    want = cell.outputs[0]  # the model's output is one of the marked values
    assert any(o.shape == want.shape and np.allclose(o, want, rtol=1e-5, atol=1e-6) for o in r.outputs)


def test_a_kernel_onnx_runtime_lacks_is_its_own_refusal(tinycnn):
    ref, data = tinycnn
    r = run(ref, data, "ort", "bf16")
    assert r.status == Status.UNSUPPORTED and r.op and r.op.startswith("Conv"), (r.status, r.message)
