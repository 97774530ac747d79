"""A fuzz graph written out: the torch spec file loads through fpdiff's sources and computes the graph (under each
layout, with dynamic dims, compiled without graph breaks), the ONNX model loads with its inputs and computes the
same, and the in-process values are what both forms compute."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx.reference import ReferenceEvaluator

from fpdiff.analysis.fuzz import emit
from fpdiff.analysis.fuzz.graph import Graph, Input, Node, Sample, TensorType, attrs_of
from fpdiff.analysis.ops.case import CHANNELS_LAST, CONTIGUOUS, TRANSPOSED
from fpdiff.core.errors import UsageError
from fpdiff.onnxtools.graph import float64_ops
from fpdiff.sources import load

T = TensorType
AGREE = 1e-12  # the same float64 kernels in and out of a spec file: equal up to reassociation at most


def three_ops(layout: str = CONTIGUOUS, dynamic: tuple[int, ...] = ()) -> Sample:
    """conv2d -> add (a broadcast bias-like input) -> softmax over the last dim, by hand."""
    g = Graph(inputs=(Input(T((2, 4, 6, 5)), layout, dynamic), Input(T((6, 2, 3, 3)), layout),
                      Input(T((6, 1, 1)), layout)),
              nodes=(Node("conv2d", (0, 1), attrs_of({"groups": 2, "stride": 1, "padding": 1, "dilation": 1})),
                     Node("add", (3, 2)),
                     Node("softmax", (4,), attrs_of({"dim": 3}))),
              output=5)
    r = np.random.default_rng(7)
    return Sample(g, tuple(r.standard_normal(x.type.shape) for x in g.inputs))


def rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / np.abs(want).max())


def test_values64_and_evaluate():
    """Every value id in float64 (inputs first), the last one the graph's output; evaluate at float32 is close."""
    s = three_ops()
    vals = emit.values64(s)
    assert len(vals) == 6 and all(v.dtype == np.float64 for v in vals)
    assert [v.shape for v in vals] == [t.shape for t in emit.value_types(s.graph)]
    assert np.array_equal(vals[0], s.values[0])
    want = emit.evaluate(s)
    assert np.array_equal(vals[5], want) and want.shape == (2, 6, 6, 5)
    np.testing.assert_allclose(want.sum(axis=3), 1.0, rtol=1e-12)  # softmax rows
    low = emit.evaluate(s, torch.float32)
    assert low.dtype == np.float32 and 0 < rel(low.astype(np.float64), want) < 1e-5


def test_cut_graph_values(tmp_path):
    """A graph whose output is an earlier value computes that value; dead nodes after it are not run."""
    s = three_ops()
    cut = s.with_(graph=Graph(s.graph.inputs, s.graph.nodes, 3))
    assert np.array_equal(emit.evaluate(cut), emit.values64(s)[3])
    path = emit.write_onnx(cut, tmp_path)[0]
    onnx.checker.check_model(onnx.load(path), full_check=True)


@pytest.mark.parametrize("layout", [CONTIGUOUS, CHANNELS_LAST, TRANSPOSED])
def test_write_torch_loads_and_runs(tmp_path, layout):
    """The spec file loads through fpdiff.sources.load and its model computes the graph from its inputs; the
    layout reaches the graph's first ops (channels-last strides, transposed-contiguous inputs)."""
    s = three_ops(layout)
    spec = emit.write_torch(s, tmp_path)
    src = load(spec)
    assert src.input_names == ["input", "arg1", "arg2"] == emit.input_names(s.graph)
    if layout == TRANSPOSED:  # passed in transposed-contiguous; the model hands the ops the transposed view
        assert src.inputs[0].shape == (2, 4, 5, 6)
    got = src.module(*src.inputs)
    assert got.dtype == torch.float64
    assert rel(got.detach().numpy(), emit.evaluate(s)) <= AGREE
    assert src.fingerprint


def test_dynamic_dims_exported(tmp_path):
    """A dynamic dim is declared to torch.export (a named Dim) and is a dim_param of the ONNX input."""
    s = three_ops(dynamic=(0,))
    src = load(emit.write_torch(s, tmp_path))
    assert src.dynamic_shapes and 0 in src.dynamic_shapes["input"]
    ep = torch.export.export(src.module, tuple(src.inputs), dynamic_shapes=src.dynamic_shapes, strict=False)
    batch = next(n for n in ep.graph.nodes if n.op == "placeholder").meta["val"].shape[0]
    assert isinstance(batch, torch.SymInt)
    model = emit.to_onnx(s)
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == "input_d0"


def test_compiles_without_graph_breaks(tmp_path):
    """torch.compile sees the whole graph as one (the interpreter traces through): fusions happen across ops."""
    s = three_ops()
    src = load(emit.write_torch(s, tmp_path))
    torch._dynamo.reset()
    explained = torch._dynamo.explain(src.module)(*src.inputs)
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    assert sum(n.op == "call_function" for n in explained.graphs[0].graph.nodes) >= 3


def test_write_onnx_round_trip(tmp_path):
    """The ONNX model and its inputs load as fpdiff.sources.load takes them (opset kept) and compute the graph."""
    s = three_ops(TRANSPOSED, dynamic=(0,))  # layout means nothing to ONNX: the same values either way
    model_path, npz = emit.write_onnx(s, tmp_path)
    src = load(model_path, inputs=npz, keep_opset=True)
    assert src.input_names == emit.input_names(s.graph)
    assert src.notes["conversion"]["opset"] == emit.OPSET
    model = onnx.load(model_path)
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Conv", "Add", "Softmax"]
    got = ReferenceEvaluator(model, new_ops=float64_ops()).run(None, dict(zip(src.input_names, src.inputs)))[0]
    assert rel(got, emit.evaluate(s)) <= 1e-10


def test_sample_survives_bytes_then_writes_the_same(tmp_path):
    """A sample read back from its bytes writes the same torch case (same graph text, same values)."""
    s = three_ops()
    back = Sample.from_bytes(s.to_bytes())
    assert back.id == s.id
    assert emit.torch_case(back).payload.kwargs == emit.torch_case(s).payload.kwargs


def test_integer_valued_output():
    """round then a layout op: integer-valued (judged by flips); round then exp: not."""
    x = (Input(T((3, 4))),)
    kept = Graph(x, (Node("round", (0,)), Node("transpose", (1,), attrs_of({"dim0": 0, "dim1": 1}))), 2)
    lost = Graph(x, (Node("round", (0,)), Node("exp", (1,))), 2)
    assert emit.integer_valued(kept) and not emit.integer_valued(lost)
    assert emit.torch_case(Sample(kept, (np.ones((3, 4)) * 0.3,))).integer_valued
    from fpdiff.analysis.fuzz.oracle import case_of  # the ONNX form's case: the same test
    assert case_of(Sample(kept, (np.ones((3, 4)) * 0.3,))).integer_valued
    assert not case_of(Sample(lost, (np.ones((3, 4)) * 0.3,))).integer_valued


def test_bad_graph_is_one_line():
    """An op outside the vocabulary, or one that does not fit its arguments, is a UsageError."""
    x = (Input(T((3, 4))),)
    with pytest.raises(UsageError, match="not in the fuzz vocabulary"):
        emit.value_types(Graph(x, (Node("nope", (0,)),), 1))
    with pytest.raises(UsageError, match="does not fit"):
        emit.to_onnx(Sample(Graph(x, (Node("matmul", (0, 0)),), 1), (np.ones((3, 4)),)))


def several_outputs() -> Sample:
    """tanh(x) returned beside softmax(tanh(x) + y): a value one output fuses away and another needs."""
    g = Graph(inputs=(Input(T((3, 5))), Input(T((1, 5)))),
              nodes=(Node("tanh", (0,)), Node("add", (2, 1)), Node("softmax", (3,), attrs_of({"dim": 1}))),
              output=4, extra=(2,))
    r = np.random.default_rng(3)
    return Sample(g, tuple(r.standard_normal(x.type.shape) for x in g.inputs))


def test_a_graph_of_several_outputs_in_both_forms(tmp_path):
    """Both outputs, in order, from the torch program and the ONNX graph; the graph survives JSON."""
    s = several_outputs()
    want = emit.evaluate_all(s)
    assert [w.shape for w in want] == [(3, 5), (3, 5)]
    np.testing.assert_allclose(want[1], np.tanh(s.values[0]), rtol=1e-15)
    assert Graph.from_dict(s.graph.as_dict()) == s.graph
    src = load(emit.write_torch(s, tmp_path / "t"))
    with torch.no_grad():
        got = src.module(*src.inputs)
    assert isinstance(got, tuple) and len(got) == 2
    assert all(rel(g.numpy(), w) <= AGREE for g, w in zip(got, want))
    model = emit.to_onnx(s)
    onnx.checker.check_model(model, full_check=True)
    assert [o.name for o in model.graph.output] == [emit.OUTPUT, f"{emit.OUTPUT}_1"]
    outs = ReferenceEvaluator(model, new_ops=float64_ops()).run(None, dict(zip(emit.input_names(s.graph), s.values)))
    assert all(rel(g, w) <= 1e-12 for g, w in zip(outs, want))
