"""How an iree-compile failure is read: a refusal of something the model asked for stays `unsupported` naming it;
IR rejected as given (before any pass) is the importer's error at import; the compiler breaking on itself (its own
dialects, its own passes' invalid IR, crashes, assertions) is an error at compile. fpdiff's
decomposition for IREE, against real iree-compile (slow): it keeps whole the ops IREE lowers whole (roll, squeeze),
a refusal of an op the decomposition made sends the program as exported instead, and a refusal of the user's own op
names that op, never the constant iree-compile reports."""
import subprocess
from pathlib import Path

import pytest
import torch

import fpdiff
from fpdiff.backends import iree
from fpdiff.backends.iree import compile_failure
from fpdiff.core import precision as prec
from fpdiff.core.errors import COMPILE, IMPORT, Crashed, StageError, Unsupported
from fpdiff.core.status import Status


def test_an_op_it_cannot_lower_is_a_refusal_naming_the_op():
    e = compile_failure('model.mlir:3:5: error: failed to legalize operation \'torch.operator\' that was explicitly '
                        'marked illegal: "torch.operator"(%0) <{name = "torch.aten.foo"}>', 1, "fp16")
    assert isinstance(e, Unsupported) and e.op == "torch.aten.foo" and e.component == "iree-compile"


def test_a_missing_math_symbol_is_a_refusal():
    e = compile_failure("error: undefined symbol: erf", 1, "fp64")
    assert isinstance(e, Unsupported) and e.op == "erf" and e.dtype == "fp64"


def test_its_own_pipeline_op_left_behind_is_an_error_not_a_refusal():
    e = compile_failure("model.mlir:1:1: error: failed to legalize operation 'util.initializer' that was explicitly "
                        'marked illegal: "util.initializer"() <{function_type = () -> ()}>', 1, "fp16")
    assert isinstance(e, StageError) and (e.stage, e.component) == ("compile", "iree-compile")
    assert "util.initializer" in str(e)


def test_a_crash_is_an_error_even_when_it_mentions_legalization():
    e = compile_failure("error: failed to legalize operation 'torch.aten.mm'\nLLVM ERROR: out of range", 1, "fp32")
    assert isinstance(e, StageError)
    e = compile_failure("Stack dump:\n0. Program arguments", -11, "fp32")
    assert isinstance(e, Crashed) and "SIGSEGV" in str(e)


@pytest.mark.parametrize("code", [-9, 247, 137])
def test_a_compiler_killed_for_memory_is_a_crash_naming_memory(code):
    """iree-compile's Python wrapper passes on its binary's death by SIGKILL as exit code 247 (sys.exit(-9)), with
    nothing on stderr: a crash (the cell's status), said as the memory it most likely ran out of."""
    from fpdiff.runtime.worker import classify_exception
    e = compile_failure("", code, "bf16")
    assert isinstance(e, Crashed) and "SIGKILL" in str(e) and "memory" in str(e) and "(no output)" not in str(e)
    assert classify_exception(e)[0] == "crash"
    assert not isinstance(compile_failure("error: bad", 1, "fp32"), Crashed)


def test_color_codes_never_reach_the_message():
    e = compile_failure("\x1b[31merror:\x1b[0m 'linalg.generic' op inferred shape mismatch", 1, "fp32")
    assert isinstance(e, StageError) and "\x1b" not in str(e)


# The IR iree-compile prints after its failed pass (--mlir-print-ir-after-failure), cut to what matters: an integer
# aten.fmod left unconverted, and the constant operand that the type conversion reports instead.
_FMOD_LEFT = """// -----// IR Dump After FinalizingBackendTypeConversion Failed //----- //
  %int8 = torch.constant.int 8
  %7 = torch.aten.fmod.Scalar %6, %int8 : !torch.vtensor<[8],si64>, !torch.int -> !torch.vtensor<[8],si64>
<unknown>:0: error: failed to legalize operation 'torch.constant.int': %1 = "torch.constant.int"() <{value = 8 : i64}>
"""


def test_a_refusal_reported_on_a_constant_names_the_op_left_unlowered():
    e = compile_failure(_FMOD_LEFT, 1, "fp32")
    assert isinstance(e, Unsupported) and e.op == "torch.aten.fmod.Scalar"
    assert "torch.constant.int" in str(e)  # what iree-compile itself said stays in the message


def test_a_failure_on_a_constant_with_no_op_left_is_not_a_refusal():
    e = compile_failure("<unknown>:0: error: failed to legalize operation 'torch.constant.float': %0 = ...", 1, "fp32")
    assert isinstance(e, StageError) and "torch.constant.float" in str(e)


# ONNX RoiAlign as iree-compile 3.13 reports it (cut): torch-mlir turns it into torch.torchvision.roi_align, which
# has no lowering, and the type conversion that follows fails on the constant it takes.
_ROI_ALIGN_LEFT = """// -----// IR Dump After FinalizingBackendTypeConversion Failed //----- //
  %int2 = torch.constant.int 2
  %13 = torch.torchvision.roi_align %1, %12, %float1.000000e00, %int5, %int5, %int2, %false : !torch.vtensor<...>
<unknown>:0: error: failed to legalize operation 'torch.constant.int': %0 = "torch.constant.int"() <{value = 2 : i64}>
"""


def test_a_torchvision_op_left_unlowered_is_a_refusal_like_an_aten_one():
    e = compile_failure(_ROI_ALIGN_LEFT, 1, "fp32", "iree-import-onnx")
    assert isinstance(e, Unsupported) and e.op == "torch.torchvision.roi_align" and e.stage == COMPILE


def test_ir_rejected_before_any_pass_is_the_importers_error_at_import():
    said = ("model.mlir:3:5: error: type of return operand 0 ('!torch.vtensor<[2,3],f32>') doesn't match function "
            "result type ('!torch.vtensor<[3,2],f32>') in function @main\n")
    e = compile_failure(said, 1, "fp32", "iree-import-onnx")
    assert type(e) is StageError and (e.stage, e.component) == (IMPORT, "iree-import-onnx")
    assert "rejects the IR iree-import-onnx wrote" in str(e) and "doesn't match" in str(e)


def test_invalid_ir_one_of_its_own_passes_made_is_the_compilers_error():
    said = ("grid.mlir:4:10: error: 'arith.divf' op requires the same type for all operands and results\n"
            "// -----// IR Dump After ConvertTorchToLinalg Failed: convert-torch-to-linalg //----- //\n")
    e = compile_failure(said, 1, "fp16", "iree-import-onnx")
    assert type(e) is StageError and (e.stage, e.component) == (COMPILE, "iree-compile")
    e = compile_failure("iree-compile: Unknown command line argument '--nope'", 1, "fp32", "iree-import-onnx")
    assert (e.stage, e.component) == (COMPILE, "iree-compile")  # no input line: not the importer's


def _real_compile(tmp_path: Path, graph) -> Exception | None:
    """An ONNX graph through iree-import-onnx and iree-compile as fpdiff runs them; the failure as it is read."""
    pytest.importorskip("iree.compiler", reason="needs iree-base-compiler")
    import onnx
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    onnx.save(model, str(tmp_path / "m.onnx"))
    subprocess.run([iree.tool("iree-import-onnx"), str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.mlir")],
                   check=True, capture_output=True)
    return _compiled(tmp_path, (tmp_path / "m.mlir").read_text())


def _compiled(tmp_path: Path, mlir: str) -> Exception | None:
    (tmp_path / "m.mlir").write_text(mlir)
    r = iree._run_compile(tmp_path / "m.mlir", iree.compile_flags("cpu", prec.FP32, ()), tmp_path / "m.vmfb", None)
    return compile_failure(r.stderr, r.returncode, "fp32", "iree-import-onnx") if r.returncode else None


def _f32(name: str, shape: list[int]):
    import onnx
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


@pytest.mark.slow  # real iree-import-onnx and iree-compile
def test_a_real_lowering_gap_is_unsupported_naming_the_models_op(tmp_path):
    """ONNX RoiAlign: iree-compile has no lowering for what it becomes (torch.torchvision.roi_align) and says so on
    a constant it takes; before, that was an error "naming no op"."""
    import onnx
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], output_height=5, output_width=5)], "roi",
        [_f32("x", [1, 1, 10, 10]), _f32("rois", [3, 4]),
         onnx.helper.make_tensor_value_info("idx", onnx.TensorProto.INT64, [3])], [_f32("y", [3, 1, 5, 5])])
    e = _real_compile(tmp_path, graph)
    assert isinstance(e, Unsupported) and e.op == "torch.torchvision.roi_align", e
    assert (e.stage, e.component) == (COMPILE, "iree-compile")


@pytest.mark.slow
def test_real_ir_the_compiler_rejects_as_given_is_the_importers_error(tmp_path):
    """A module iree-import-onnx wrote (a one-Add graph), its result type then made to disagree with what it
    returns: iree-compile's verifier rejects it before any pass, which charges the IR's writer, not the compiler;
    the same module as written compiles."""
    import onnx
    graph = onnx.helper.make_graph([onnx.helper.make_node("Add", ["x", "x"], ["y"])], "add", [_f32("x", [2, 3])],
                                   [_f32("y", [2, 3])])
    assert _real_compile(tmp_path, graph) is None
    mlir = (tmp_path / "m.mlir").read_text()
    head, _, body = mlir.partition(") -> !torch.vtensor<[2,3],f32>")
    assert body, mlir
    e = _compiled(tmp_path, f"{head}) -> !torch.vtensor<[3,2],f32>{body}")
    assert type(e) is StageError and (e.stage, e.component) == (IMPORT, "iree-import-onnx"), e
    assert "doesn't match function result type" in str(e)


SPEC = str(Path(__file__).parents[1] / "specs" / "iree_shifted_window.py")


class Roll(torch.nn.Module):
    def forward(self, x):
        return torch.roll(x, shifts=2, dims=1) * 2


class Upsample(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear")


def _compile(m, x, tmp_path) -> dict:
    program = torch.export.export(m, (x,), strict=False)
    return iree.compile_program(program, prec.FP32, iree.compile_flags("cpu", prec.FP32, ()), tmp_path / "m.mlir",
                                tmp_path / "m.vmfb")


@pytest.mark.slow  # real iree-compile
def test_shifted_windows_compile_at_every_precision():
    r = fpdiff.check(SPEC, backends=["iree"], precisions=["fp32", "fp16", "bf16"])
    for c in r.cells:
        assert c.status in (Status.PASS, Status.PRECISION_LOSS), (c.precision, c.status, c.reason)
        assert "iree_decomposition" not in c.info  # roll and squeeze kept whole: the first route compiles


@pytest.mark.slow
def test_an_op_the_decomposition_made_sends_the_program_as_exported(tmp_path, monkeypatch):
    monkeypatch.setattr(iree, "_lowered_whole", set)  # torch's own table: roll opens into an integer fmod
    route = _compile(Roll(), torch.randn(3, 8), tmp_path)
    assert route["iree_decomposition"] == "none"
    assert "made torch.aten.fmod.Scalar" in route["iree_decomposition_why"]


class ReflectPad(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.pad(x, (0, 0, 1, 0), mode="reflect")


@pytest.mark.slow  # real iree-compile
def test_ir_the_decomposition_made_ill_typed_sends_the_program_as_exported(tmp_path):
    """torch's reflection-pad decomposition under a dynamic dim subtracts a tensor from a SymInt, which the FX
    importer writes as ill-typed IR: fpdiff's route, not IREE's failure; the program as exported compiles."""
    x = torch.randn(1, 2, 1)
    program = torch.export.export(ReflectPad(), (x,), dynamic_shapes={"x": {1: torch.export.Dim("n", min=2)}})
    route = iree.compile_program(program, prec.FP32, iree.compile_flags("cpu", prec.FP32, ()), tmp_path / "m.mlir",
                                 tmp_path / "m.vmfb")
    assert route["iree_decomposition"] == "none"
    assert "fpdiff's decomposition" in route["iree_decomposition_why"]


@pytest.mark.slow
def test_a_refusal_of_the_users_op_names_it(tmp_path):
    with pytest.raises(Unsupported) as e:
        _compile(Upsample(), torch.randn(1, 2, 4, 4), tmp_path)
    assert e.value.op == "torch.aten.upsample_bilinear2d.vec" and "torch.constant" not in e.value.op


def test_a_read_back_uint8_is_the_graphs_uint8_and_a_shapeless_marked_output_gets_its_shape():
    import numpy as np
    import onnx
    from onnx import TensorProto as T
    from onnx import helper
    out = helper.make_tensor_value_info("q", T.UINT8, [2])
    got = iree._declared(np.array([-128, 5], np.int8), out)  # IREE's runtime: the bits, the sign lost (ops-004)
    assert got.dtype == np.uint8 and got.tolist() == [128, 5]
    wide = iree._declared(np.array([1.5], np.float32), out)
    assert wide.dtype == np.float32  # another kind is left as it is
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", T.FLOAT,
                          [3, 4])], [helper.make_tensor_value_info("y", T.FLOAT, None)])
    typed = iree._typed_outputs(helper.make_model(g))
    assert [d.dim_value for d in typed.graph.output[0].type.tensor_type.shape.dim] == [3, 4]
    onnx.checker.check_model(typed)


def test_an_import_failure_is_its_exceptions_own_line_with_the_onnx_type_named():
    stderr = ('Traceback (most recent call last):\n  File "onnx_importer.py", line 779, in tensor_proto_to_attr\n'
              "iree.compiler.extras.onnx_importer.OnnxImportError: Unhandled ONNX TensorProto data: data_type: 17\n"
              'int32_data: 0\nname: "z"\n')
    e = iree.import_failure(stderr)
    assert e.stage == IMPORT and e.component == "iree-import-onnx" and "\n" not in str(e)
    assert "OnnxImportError: Unhandled ONNX TensorProto data: data_type: 17 (FLOAT8E4M3FN)" in str(e)
    assert str(iree.import_failure("no exception here")).endswith("no exception here")
