from fpdiff.errors import Unsupported
from fpdiff.worker import classify_exception


def test_torch_missing_kernel_is_unsupported_with_op_and_dtype():
    e = RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\'')
    assert classify_exception(e) == ("unsupported", "addmm_impl_cpu_", "Half")


def test_ort_missing_kernel_names_op_and_node():
    e = RuntimeError("NOT_IMPLEMENTED : Could not find an implementation for Gemm(13) node with name 'node_linear'")
    status, op, _ = classify_exception(e)
    assert status == "unsupported" and op == "Gemm (node node_linear)"


def test_ort_type_error_on_load_is_unsupported():
    e = RuntimeError("Type Error: Type 'tensor(bfloat16)' of input parameter (x) of operator (Conv) in node "
                     "(node_conv2d) is invalid.")
    assert classify_exception(e)[:2] == ("unsupported", "Conv (node node_conv2d)")


def test_other_errors_are_errors_and_explicit_unsupported_keeps_its_op():
    assert classify_exception(ValueError("shapes do not match"))[0] == "error"
    assert classify_exception(Unsupported("no", op="tanh", dtype="fp64")) == ("unsupported", "tanh", "fp64")
