"""Support in the runtime's own word: one-node ONNX graphs through the real backends, each cell's state read from what
the runtime recorded (ORT's kernel registry and the casts it inserted, OpenVINO's layer precisions under the hint,
IREE's dispatch types) or from its refusal."""
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import fpdiff
from fpdiff.analysis.ops.case import NATIVE, NOT_IMPLEMENTED, OTHER_DTYPE, OpsCell
from fpdiff.analysis.ops.support import support_state, support_table
from fpdiff.core.compare import Finding
from fpdiff.core.support import Support

SHAPE = [2, 3, 4, 4]


def _one_node(folder: Path, op: str, inputs: int = 1, out: list[int] = SHAPE, **attrs) -> str:
    """A float32 graph of one `op` node at opset 18: fpdiff's grid casts it per precision."""
    names = [f"x{i}" for i in range(inputs)]
    graph = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], op.lower(),
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in names],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    path = folder / f"{op.lower()}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return str(path)


def _states(path: str, backends: list[str], precisions: list[str]) -> dict:
    """(backend, precision) -> (state, detail, cell) of each checked cell."""
    r = fpdiff.check(path, backends=backends, precisions=precisions, keep_opset=True)
    def record(c):
        said = c.info.get("support")
        return Support.from_dict(said) if said is not None else None
    return {(c.backend, c.precision): (*support_state(c.status, c.findings, record(c), c.precision, c.reason), c)
            for c in r.cells if c.backend in backends}


@pytest.fixture(scope="module")
def avgpool(tmp_path_factory) -> dict:
    """AveragePool on three runtimes at fp16 and bf16: one check, shared by the tests that read it."""
    path = _one_node(tmp_path_factory.mktemp("avgpool"), "AveragePool", out=[2, 3, 3, 3], kernel_shape=[2, 2])
    return {"path": path, **_states(path, ["ort", "openvino", "iree"], ["fp16", "bf16"])}


@pytest.mark.slow
def test_ort_op_with_an_fp16_cpu_kernel_is_native(tmp_path):
    state, detail, cell = _states(_one_node(tmp_path, "Max", inputs=2), ["ort"], ["fp16"])[("ort", "fp16")]
    assert state == NATIVE, (detail, cell.info.get("support"))
    assert "float16" in cell.info["support"]["ops"]["Max"]["kernel_types"]
    assert "registers a float16 kernel" in detail


@pytest.mark.slow
def test_ort_op_with_only_a_float_kernel_runs_in_float_through_inserted_casts(avgpool, tmp_path):
    state, detail, cell = avgpool[("ort", "fp16")]
    op = cell.info["support"]["ops"]["AveragePool"]
    assert state == OTHER_DTYPE and op["kernel_types"] == ["float"] and op["ran"] == ["float32"], op
    assert "registers no float16 kernel" in detail
    # the claim checked on the runtime itself: its optimized graph wraps the node in casts to float and back
    import onnxruntime as ort
    fp16 = onnx.load(avgpool["path"])
    for v in [*fp16.graph.input, *fp16.graph.output]:
        v.type.tensor_type.elem_type = TensorProto.FLOAT16
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(fp16.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    nodes = onnx.load(opts.optimized_model_filepath).graph.node
    assert [n.op_type for n in nodes] == ["Cast", "AveragePool", "Cast"]
    assert helper.get_attribute_value(nodes[0].attribute[0]) == TensorProto.FLOAT


@pytest.mark.slow
def test_ort_op_with_no_kernel_at_the_dtype_is_not_implemented(tmp_path):
    state, detail, cell = _states(_one_node(tmp_path, "Add", inputs=2), ["ort"], ["bf16"])[("ort", "bf16")]
    assert cell.status == "unsupported" and state == NOT_IMPLEMENTED, (cell.status, cell.reason)
    assert "Could not find an implementation for Add(14)" in detail


@pytest.mark.slow
def test_openvino_states_follow_the_precision_each_layer_ran(avgpool):
    import openvino as ov
    state, detail, cell = avgpool[("openvino", "bf16")]  # its CPU plugin keeps pooling in f32 under a bf16 hint
    assert state == OTHER_DTYPE and cell.info["support"]["ops"]["AvgPool"]["ran"] == ["float32"], detail
    assert "ran AvgPool in f32 under the bf16 hint" in detail
    state, detail, cell = avgpool[("openvino", "fp16")]
    if "FP16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        assert state == NATIVE and "ran AvgPool in f16" in detail, detail
    else:  # the plugin replaces an f16 hint on a CPU without fp16 arithmetic
        assert state == OTHER_DTYPE and cell.info["inference_precision"] != "f16", detail


@pytest.mark.slow
def test_iree_states_follow_its_dispatch_types(avgpool, tmp_path):
    state, detail, _ = avgpool[("iree", "fp16")]
    assert state == NATIVE and "float16" in detail, detail
    # a bf16 cell casts the graph converted to opset 22, where AveragePool takes bfloat16: IREE computes it in bf16
    # (before, the cast kept it float32 and IREE's window sum was a conv with f32 operands)
    state, detail, _ = avgpool[("iree", "bf16")]
    assert state == NATIVE and "bfloat16" in detail, detail
    state, detail, _ = _states(_one_node(tmp_path, "Softmax"), ["iree"], ["fp16"])[("iree", "fp16")]
    assert state == OTHER_DTYPE and "softmax" in detail and "xf32" in detail, detail


def test_kernel_record_is_capped(tmp_path, monkeypatch):
    from fpdiff.backends import ort as ort_backend
    names = ["x0", "a", "b", "c"]
    nodes = [helper.make_node(op, [i], [o]) for op, i, o in zip(["Abs", "Neg", "Exp"], names, names[1:])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("c", TensorProto.FLOAT, SHAPE)])
    path = tmp_path / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    monkeypatch.setattr(ort_backend, "SUPPORT_OPS", 2)
    record = ort_backend.kernel_support(path, None, "CPUExecutionProvider", "float32")
    assert list(record.ops) == ["Abs", "Neg"] and record.not_recorded == {"ops": 1} and record.cut
    assert record.as_dict()["ops_not_recorded"] == 1 and Support.from_dict(record.as_dict()) == record
    assert all(e["state"] == NATIVE for e in record.ops.values())


def test_rules_when_the_runtime_said_nothing_or_only_the_cell_did():
    assert support_state("crash", [], None, "fp16") == (None, "")
    assert support_state("unsupported", [], None, "fp16", "ort is not available: onnxruntime does not import") \
        == (None, "")
    changed = Finding("hint-replaced", "OpenVINO was asked for f16 and runs bf16")
    state, detail = support_state("pass", [changed], None, "fp16")
    assert state == OTHER_DTYPE and "runs bf16" in detail
    assert support_state("pass", [], None, "fp16")[0] == NATIVE  # ran, and nothing says another dtype


def test_table_keeps_the_most_telling_state_per_op_backend_and_precision():
    def cell(variant: str, support: str | None, precision: str = "fp16") -> OpsCell:
        return OpsCell(op="AveragePool", catalog="onnx", variant=variant, case=f"c-{variant}", family="pool",
                       backend="ort", device="cpu", precision=precision, shape_variant="static", status="pass",
                       support=support,
                       support_detail=f"{support} {variant}")
    rows = support_table([cell("sample", NATIVE), cell("channels-last", OTHER_DTYPE), cell("tails", None),
                          cell("sample", NATIVE, "fp32").as_dict()])
    assert [(r["precision"], r["support"], r["detail"]) for r in rows] == [
        ("fp16", OTHER_DTYPE, "other-dtype channels-last"), ("fp32", NATIVE, "native sample")]


def test_a_support_record_with_a_state_no_reader_knows_is_refused_where_it_is_made():
    with pytest.raises(ValueError, match="state 'kinda' is none of native, other-dtype, not-implemented"):
        Support("ort", {"Abs": {"state": "kinda"}})
    said = Support("openvino 2025 CPU", {"Erf": {"state": OTHER_DTYPE, "said": "ran bf16"}},
                   details={"hint": "f16", "ran_hint": "bf16"})
    assert Support.from_dict(said.as_dict()) == said and said.narrowed(frozenset()).ops == {}

