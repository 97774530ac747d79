"""How an iree-compile failure is read: a refusal of something the model asked for stays `unsupported` naming it;
the compiler breaking on itself (its own dialects, crashes, assertions) is an error at compile."""
from fpdiff.backends.iree import compile_failure
from fpdiff.core.errors import StageError, Unsupported


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
    assert isinstance(e, StageError) and "signal 11" in str(e)


def test_color_codes_never_reach_the_message():
    e = compile_failure("\x1b[31merror:\x1b[0m 'linalg.generic' op inferred shape mismatch", 1, "fp32")
    assert isinstance(e, StageError) and "\x1b" not in str(e)
