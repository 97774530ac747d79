"""ONNX Runtime's refusals name the model's op, not one it made."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import fpdiff

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast


def test_a_refusal_inside_an_expanded_function_names_the_models_op(tmp_path):
    """ORT has no bfloat16 Clip on the CPU: it expands Clip as its ONNX function, whose Where (at opset 13) or Less
    (at opset 22, where a bf16 cell's graph is converted) then has no bfloat16: the cell names Clip, which the model
    holds, not the op ORT made."""
    g = helper.make_graph([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TP.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [2, 8])],
                          initializer=[numpy_helper.from_array(np.float32(0), "lo"),
                                       numpy_helper.from_array(np.float32(6), "hi")])
    path = tmp_path / "clip.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    r = fpdiff.check(str(path), backends=["ort"], precisions=["bf16", "fp32"])
    bf16 = next(c for c in r.cells if c.precision == "bf16")
    if bf16.status == "pass":
        pytest.skip("this ONNX Runtime has a bfloat16 Clip kernel on the CPU")
    assert bf16.status == "unsupported", bf16.reason
    assert [f.op for f in bf16.findings if f.kind == "unsupported"] == ["Clip"], bf16.findings
    assert next(c for c in r.cells if c.precision == "fp32").status == "pass"


def test_a_refusal_of_a_node_the_optimizer_fused_names_the_models_ops(tmp_path):
    """MatMul + Add -> Softmax at bf16: ORT fuses MatMul and Add into a Gemm ('/MatMulAddFusion') that has no
    bfloat16 kernel. The refusal names MatMul+Add, which the model holds; Softmax's function (no Gemm in it) was
    named before, with a remedy that keeps the wrong op in fp32."""
    rng = np.random.default_rng(0)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["y"], axis=-1)], "head",
        [helper.make_tensor_value_info("x", TP.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [4, 10])],
        initializer=[numpy_helper.from_array(rng.standard_normal((16, 10)).astype(np.float32), "w"),
                     numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "b")])
    path = tmp_path / "head.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    (cell,) = fpdiff.check(str(path), backends=["ort"], precisions=["bf16"]).cells
    if cell.status == "pass":
        pytest.skip("this ONNX Runtime runs a bfloat16 Gemm on the CPU")
    assert cell.status == "unsupported" and "fused into Gemm by ONNX Runtime's graph optimizer" in cell.reason
    assert [f.op for f in cell.findings if f.kind == "unsupported"] == ["MatMul+Add"], cell.findings


def test_ops_inside_if_branches_are_counted_by_the_dtype_they_ran_in(tmp_path):
    """ORT's CPU runs the fp16 Convs inside an If's branches in fp32: the count sees the branches' ops, so the cell
    says how much of the model ran wider (before, only the top graph's Tanh was counted)."""
    import onnx_models as om
    from fpdiff.backends.ort import op_dtypes
    from fpdiff.onnxtools.mixed import cast_model
    path = tmp_path / "if16.onnx"
    onnx.save(cast_model(om.if_conv(), TP.FLOAT16), str(path))
    counts = op_dtypes(path)
    assert sum(counts.values()) >= 7, counts  # Conv, Relu, Mul in each branch, and the Tanh


def test_the_optimized_graph_is_written_apart_from_the_shared_cache(tmp_path):
    """Two runs of one model at once read the same cached graph: ONNX Runtime's optimized copy, rewritten at every
    session, must not sit beside it (one run read the file torn while the other wrote it: a false `error`)."""
    cache = tmp_path / "cache"
    r = fpdiff.check("example:tinycnn", backends=["ort"], precisions=["fp16"], repeat=1, shape_variants=["static"],
                     cache_dir=str(cache))
    assert r.cells[0].status == "pass" and r.cells[0].op_dtypes, r.cells[0].reason  # the optimized graph was read
    assert sorted(p.name for p in cache.rglob("*.onnx") if ".ort-" in p.name) == []


def test_only_a_node_named_after_a_fusion_is_read_as_fused():
    """An inlined If branch renames the model's own Conv ('If_0_else_branch__Inline_0__/stft/Conv', silero-vad): that
    refusal stays the model's Conv; a node named after a fusion names the ops it fused."""
    from fpdiff.backends.ort import _fused_by_ort
    conv = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="Conv_2")], "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TP.FLOAT, None)]))
    said = "Could not find an implementation for Conv(22) node with name 'If_0_else_branch__Inline_0__/stft/Conv'"
    assert _fused_by_ort(conv, "Conv", said) is None
    assert _fused_by_ort(conv, "Conv", "Could not find an implementation for Conv(22) node with name 'Conv_2'") is None
    head = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"]),
         helper.make_node("Mul", ["y", "y"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TP.FLOAT, [1, 4])], [helper.make_tensor_value_info("z", TP.FLOAT, None)]))
    said = "Could not find an implementation for Gemm(13) node with name '/MatMulAddFusion'"
    assert _fused_by_ort(head, "Gemm", said)[1] == "MatMul+Add"  # MatMul's Mul is not the model's Mul
