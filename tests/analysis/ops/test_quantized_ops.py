"""The sweep's quantized cases: the vocabulary is built and its emulation is exact (against ONNX's own test data and
each case's own spec), 4-bit values are read back, and a quantized case is judged against its emulation on real
backends, catching IREE's unscaled per-channel QLinearConv bias (findings/ops-021)."""
from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

from fpdiff.analysis.ops import OpsOptions, ops, variants
from fpdiff.analysis.ops.case import OnnxSample
from fpdiff.analysis.ops.quantized_cases import TIE_SCALE, qdq_case, quantized_cases
from fpdiff.analysis.options import RunOptions
from fpdiff.onnxtools.emulate import WIDE_SUFFIX, emulate, file_format, marked_quantizers


@pytest.fixture(scope="module")
def cases():
    return {c.case_id: c for c in quantized_cases(0)}


def test_every_case_is_a_quantized_graph_with_an_exact_emulation(cases):
    assert len(cases) >= 60
    ops_made = {c.op for c in cases.values()}
    assert {"QuantizeLinear", "QLinearMatMul", "QLinearConv", "MatMulInteger", "ConvInteger",
            "com.microsoft.MatMulNBits"} <= ops_made
    for c in cases.values():
        s = c.payload
        assert isinstance(s, OnnxSample) and s.quantized and file_format(s.model)
        out = emulate(s.model, s.inputs).outputs[0]
        assert np.all(np.isfinite(out)), c.case_id
        if s.float_model is not None:  # the twin runs in the reference evaluator and has the same output shape
            from fpdiff.onnxtools.evaluator import evaluator
            twin = evaluator(s.float_model).run(None, s.inputs)[0]
            assert np.shape(twin) == np.shape(out), c.case_id


def test_ties_round_half_to_even(cases):
    c = cases["QuantizeLinear~quantized-0"]  # int8 ties, zero point 0
    x = c.payload.inputs["X"].astype(np.float64)
    got = emulate(c.payload.model, c.payload.inputs).outputs[0]
    codes = x / TIE_SCALE
    assert np.all(codes != np.round(codes))  # every value a tie
    assert np.array_equal(got / TIE_SCALE, np.round(codes))  # numpy rounds half to even


def test_qlinear_emulation_matches_onnx_test_data():
    """The exact QLinearMatMul, QLinearConv, MatMulInteger and ConvInteger kernels give ONNX's own expected outputs."""
    from onnx.backend.test.case.node import collect_testcases
    seen = 0
    for t in collect_testcases(None):
        if not any(k in t.name for k in ("qlinearmatmul", "qlinearconv", "matmulinteger", "convinteger")):
            continue
        ins, outs = t.data_sets[0]
        feeds = {i.name: np.asarray(v) for i, v in zip(t.model.graph.input, ins)}
        got = emulate(t.model, feeds).outputs
        assert all(np.array_equal(np.asarray(g, np.float64), np.asarray(o).astype(np.float64))
                   for g, o in zip(got, outs)), t.name
        seen += 1
    assert seen >= 10


def test_dynamic_quantize_scale_is_the_float32_output():
    """DynamicQuantizeLinear's codes come from its float32 scale, as ONNX's test data has them (a code a step apart
    with the real quotient)."""
    from onnx.backend.test.case.node import collect_testcases
    t = next(t for t in collect_testcases(None) if t.name == "test_dynamicquantizelinear_max_adjusted")
    ins, outs = t.data_sets[0]
    got = emulate(t.model, {t.model.graph.input[0].name: ins[0]}).outputs
    assert np.array_equal(got[0], outs[0].astype(np.float64)) and float(got[1]) == float(outs[1])


def test_four_bit_quantizers_are_read_back_through_an_8_bit_cast(cases):
    m = cases["QuantizeLinear~quantized-16"].payload.model  # int4
    marked, names = marked_quantizers(m)
    assert names == ["X_q"]
    assert marked.graph.output[-1].name == "X_q" + WIDE_SUFFIX
    assert marked.graph.output[-1].type.tensor_type.elem_type == onnx.TensorProto.INT8


def test_qdq_wraps_a_catalog_op_with_its_float_graph_as_twin():
    from fpdiff.analysis.ops import catalog
    conv = catalog.select(["onnx"], ["Conv"], 1)[0][0]
    made = qdq_case(conv, 0)
    assert len(made) == 1 and made[0].variant == "qdq"
    assert made[0].payload.float_model is conv.payload.model
    assert any(n.op_type == "QuantizeLinear" for n in made[0].payload.model.graph.node)
    assert qdq_case(made[0], 0) == []  # a quantized case is not wrapped again


def test_variants_are_registered_and_not_default():
    assert "quantized" in variants.VARIANTS and "qdq" in variants.VARIANTS
    assert "quantized" not in variants.DEFAULT_VARIANTS and "qdq" not in variants.DEFAULT_VARIANTS


@pytest.mark.slow
def test_quantized_sweep_judges_against_the_emulation(tmp_path):
    """On ONNX Runtime and IREE, QLinearConv cases judged at their own format: IREE's per-channel QLinearConv adds its
    int32 bias unscaled (findings/ops-021), hundreds of steps from the emulation, and its repro re-triggers; ONNX
    Runtime passes or costs only the format."""
    r = ops(OpsOptions(catalogs=("onnx",), patterns=["QLinearConv"], variants=["quantized"],
                       backends=("ort", "iree"), precisions=("fp32",), repro_dir=str(tmp_path / "rep")),
            RunOptions(timeout=120, cache_dir=str(tmp_path / "cache")))
    cells = {(c.case, c.backend): c for c in r.cells if c.variant == "quantized"}
    conv = cells[("QLinearConv~quantized-0", "iree")]
    assert conv.precision == "int8" and conv.status == "mismatch", conv.reason
    assert conv.metrics["departure_steps"] > 100
    assert conv.repro["rule"] == "steps" and conv.repro["retriggers"] is True, conv.repro
    ort_cells = [c for (_, b), c in cells.items() if b == "ort"]
    assert len(ort_cells) == 12 and all(c.status in ("pass", "quantization-loss") for c in ort_cells)
    assert all(c.metrics["kernel_steps"] == 0.0 for c in ort_cells)


def test_support_of_a_quantized_cell_is_its_kernels_word():
    from fpdiff.analysis.ops.case import OpsCell
    from fpdiff.analysis.ops.quantized import support_of
    from fpdiff.core.compare import Finding
    case = quantized_cases(0)[0]

    def cell(status, findings=(), info=None, reason=""):
        return OpsCell.of(case, "ort", "int8", "static", status, findings=list(findings), info=info or {},
                          reason=reason)
    assert support_of(cell("pass", info={"integer_ops": {"QLinearConv": 1}})) == (
        "native", "ran in integer kernels: QLinearConv 1")
    state, said = support_of(cell("quantization-loss", [Finding("left-float", "2 compute nodes ran in float")]))
    assert state == "other-dtype" and "2 compute nodes" in said
    assert support_of(cell("unsupported", reason="no translation for QLinearMatMul"))[0] == "not-implemented"
    assert support_of(cell("error", reason="it broke")) == (None, "")


def test_variants_only_needs_a_variant_and_leaves_no_catalog_gap():
    from fpdiff.core.errors import UsageError
    from fpdiff.report.support_page import not_run
    with pytest.raises(UsageError, match="variants-only"):
        ops(OpsOptions(catalogs=("onnx",), patterns=["Relu"], variants=[], variants_only=True, backends=("ort",)))
    assert not_run("t", {"selection": {"catalogs": ["onnx"], "patterns": None, "variants_only": True}}, []) == []
    assert not_run("t", {"selection": {"catalogs": ["onnx"], "patterns": ["Relu"]}}, [])  # a plain sweep's gap


def test_a_layers_weights_become_parameters_of_the_one_op_model():
    """The quantize variant holds every float tensor but the first as the model's parameters (what quantizers
    quantize as weights); the model computes what the plain one-op model computes."""
    import torch

    from fpdiff.analysis.ops.case import Case, TorchSample
    from fpdiff.analysis.ops.torch_catalog import OneOp, case_tensors, input_names
    x, w, b = (torch.randn(1, 3, 5, 5, dtype=torch.float64), torch.randn(4, 3, 3, 3, dtype=torch.float64),
               torch.randn(4, dtype=torch.float64))
    plain = TorchSample("torch.nn.functional.conv2d", (x, w, b), {"padding": 1})
    case = Case("torch", "nn.functional.conv2d", "nn.functional.conv2d#0", payload=plain)
    made = variants.VARIANTS["quantize"].apply(case)
    assert len(made) == 1 and made[0].variant == "quantize"
    held = made[0].payload
    assert held.params == (1, 2) and input_names(held) == ["input"]
    assert [t.shape for t in case_tensors(held)] == [x.shape]
    m = OneOp(held)
    assert [p.shape for p in m.parameters()] == [w.shape, b.shape]
    assert isinstance(m.layer, torch.nn.Conv2d)  # a quantizer finds a layer by its module
    assert torch.equal(m.call(x), OneOp(plain).call(x, w, b))
    lin = TorchSample("torch.nn.functional.linear", (torch.randn(3, 5, dtype=torch.float64),
                                                     torch.randn(4, 5, dtype=torch.float64)), {}, params=(1,))
    assert isinstance(OneOp(lin).layer, torch.nn.Linear)
    assert torch.equal(OneOp(lin).call(lin.args[0]), OneOp(dataclasses.replace(lin, params=())).call(*lin.args))
    add = TorchSample("torch.add", (x, x.clone()), {}, params=(1,))
    assert OneOp(add).layer is None and torch.equal(OneOp(add).call(x), 2 * x)  # another op: its functional form


@pytest.mark.slow
def test_the_quantize_variant_quantizes_a_layer_with_the_backends_own_quantizer(tmp_path):
    """conv2d with its weight and bias as parameters, quantized by ExecuTorch's XNNPACKQuantizer (PT2E) and run by
    its XNNPACK delegate: judged by quant's three readings, within the emulation, in integer kernels."""
    r = ops(OpsOptions(catalogs=("torch",), patterns=["nn.functional.conv2d"], variants=["quantize"],
                       variants_only=True, backends=("executorch",), repro_dir=None),
            RunOptions(timeout=300, cache_dir=str(tmp_path / "cache")))
    (cell,) = r.cells
    assert cell.variant == "quantize" and cell.precision == "int8"
    assert cell.status in ("pass", "quantization-loss"), cell.reason
    assert cell.support == "native" and cell.metrics["departure"] < 1e-5


@pytest.mark.slow
def test_inductors_quantizer_finds_a_one_op_layer(tmp_path):
    """X86InductorQuantizer finds conv and linear by the nn module they came from: the quantize variant's layer
    modules make it quantize conv2d (it quantized none when the one-op model called F.conv2d)."""
    r = ops(OpsOptions(catalogs=("torch",), patterns=["nn.functional.conv2d"], variants=["quantize"],
                       variants_only=True, backends=("inductor",), repro_dir=None),
            RunOptions(timeout=300, cache_dir=str(tmp_path / "cache")))
    (cell,) = r.cells
    assert cell.status in ("pass", "quantization-loss"), cell.reason
