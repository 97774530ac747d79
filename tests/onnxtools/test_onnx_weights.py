"""A weight-quantized graph's integer weights read back as its quantizer made them (onnxruntime's dynamic quantizer,
its 4- and 8-bit MatMulNBitsQuantizer), each matched to the float weight and the float node its node lists name;
and the check that a weight-only graph is the float graph with its weights rounded and nothing else."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from fpdiff.core.errors import UsageError
from fpdiff.onnxtools.emulate import emulate
from fpdiff.onnxtools.quantize import known_nodes
from fpdiff.onnxtools.weights import REWRITE_FLOOR, quantized_weights, rewrite, weight_costs

RNG = np.random.default_rng(3)


def float_graph(gemm: bool = False) -> onnx.ModelProto:
    """x [2, 8, 64] -> MatMul(W1 [64, 32]) -> Add(b) -> Tanh -> MatMul(W2 [32, 16]); with `gemm`, x is [8, 64] and
    the first layer is one Gemm(transB=1) as torch.onnx writes a linear layer on a matrix."""
    w1, b = RNG.normal(0, 0.2, (64, 32)).astype(np.float32), RNG.normal(0, 1, 32).astype(np.float32)
    w2 = RNG.normal(0, 0.2, (32, 16)).astype(np.float32)
    inits = [numpy_helper.from_array(w2, "W2"), numpy_helper.from_array(b, "b")]
    if gemm:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(w1.T), "W1"))
        first = [helper.make_node("Gemm", ["x", "W1", "b"], ["h"], name="fc1", transB=1)]
        shape, out = [8, 64], [8, 16]
    else:
        inits.append(numpy_helper.from_array(w1, "W1"))
        first = [helper.make_node("MatMul", ["x", "W1"], ["m"], name="fc1"),
                 helper.make_node("Add", ["m", "b"], ["h"], name="bias1")]
        shape, out = [2, 8, 64], [2, 8, 16]
    nodes = [*first, helper.make_node("Tanh", ["h"], ["t"], name="act"),
             helper.make_node("MatMul", ["t", "W2"], ["y"], name="fc2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", T.FLOAT, out)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def nbits(m: onnx.ModelProto, bits: int) -> onnx.ModelProto:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    copy = onnx.ModelProto()
    copy.CopyFrom(m)  # the quantizer rewrites the model it is given
    q = MatMulNBitsQuantizer(copy, bits=bits, block_size=32, is_symmetric=True)
    q.process()
    return q.model.model


def feeds(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    return {"x": RNG.normal(size=shape).astype(np.float32)}


@pytest.mark.parametrize("bits", [4, 8])
def test_matmulnbits_weights_read_back_exactly_as_the_emulation_computes_them(bits):
    m = float_graph()
    q, x = nbits(m, bits), feeds(m)
    ws = quantized_weights(q, m)
    assert [(w.weight, w.nodes, w.ops) for w in ws] == [("W1", ("fc1",), ("MatMul",)), ("W2", ("fc2",), ("MatMul",))]
    step = {4: 1 / 7, 8: 1 / 127}[bits]  # symmetric: the largest of a block is 7 (127) steps
    for w in ws:
        exact = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == w.weight))
        assert 0 < np.abs(w.values - exact).max() <= step * np.abs(exact).max() / 2 + 1e-7
    r = rewrite(q, m, x, emulate(q, x).outputs)
    assert r.apart <= REWRITE_FLOOR and r.first is None and r.weights_cost > 0  # rounding its weights, nothing else
    costs = weight_costs(m, x, ws)
    assert set(costs) == {"W1", "W2"} and all(0 < c < r.weights_cost * 1.5 for c in costs.values())


def test_a_doubled_bias_is_the_quantizers_rewrite_and_named_where_it_starts():
    """findings/quant-015's graph: MatMulNBits takes the bias as input 5 and the Add after it stays."""
    m = float_graph()
    q, x = nbits(m, 4), feeds(m)
    node = next(n for n in q.graph.node if n.op_type == "MatMulNBits" and n.input[1].startswith("W1"))
    node.input.extend([""] * (5 - len(node.input)) + ["b"])
    r = rewrite(q, m, x, emulate(q, x).outputs)
    assert r.apart > 2 * r.weights_cost > 0 and r.first == "m" and r.node == f"MatMulNBits {node.name}"


def test_a_dynamic_gemm_is_named_as_quantize_dynamic_renames_it(tmp_path):
    """It quantizes the Gemm's weight transposed (W_Transposed), as the MatMul it replaces the Gemm with reads it."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    m = float_graph(gemm=True)
    src, out = tmp_path / "g.onnx", tmp_path / "q.onnx"
    onnx.save(m, str(src))
    quantize_dynamic(str(src), str(out), per_channel=True, weight_type=QuantType.QInt8)
    ws = quantized_weights(onnx.load(str(out)), m)
    assert [(w.weight, w.nodes) for w in ws] == [("W1", ("fc1_MatMul",)), ("W2", ("fc2",))]
    exact = numpy_helper.to_array(m.graph.initializer[-1])
    got = next(w for w in ws if w.weight == "W1").values
    assert got.shape == exact.shape and np.abs(got - exact).max() <= np.abs(exact).max(axis=1).max() / 127


def test_a_gemm_in_a_dynamic_cells_node_list_is_refused_with_the_name_that_works(tmp_path):
    path = tmp_path / "g.onnx"
    onnx.save(float_graph(gemm=True), str(path))
    with pytest.raises(UsageError, match="name fc1_MatMul"):
        known_nodes(path, ("fc1",), "nodes_to_exclude", "the graph", dynamic=True)
    known_nodes(path, ("fc1_MatMul", "fc2"), "nodes_to_exclude", "the graph", dynamic=True)
    known_nodes(path, ("fc1",), "nodes_to_exclude", "the graph")  # quantize_static reads the Gemm's own name
    with pytest.raises(UsageError, match="does not have: fc1_MatMul"):
        known_nodes(path, ("fc1_MatMul",), "nodes_to_exclude", "the graph")


def test_a_graph_with_a_quantized_weight_matched_to_nothing_gets_no_rewrite_verdict():
    """Rounding only the weights it could match, the float graph would differ from the quantized one by the rest's
    rounding alone: no verdict then (a LiteRT file's quantized embedding table, before its tables were paired)."""
    m = float_graph()
    q, x = nbits(m, 4), feeds(m)
    for t in q.graph.initializer:
        if t.name == "W2_Q4":
            t.name = "table_Q4"
    for n in q.graph.node:
        if "W2_Q4" in n.input:
            n.input[1] = "table_Q4"
    assert len(quantized_weights(q, m)) == 1
    assert rewrite(q, m, x, emulate(q, x).outputs) is None
