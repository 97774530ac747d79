from fpdiff.core.errors import Unsupported
from fpdiff.core.status import Status
from fpdiff.runtime.worker import classify_exception


def test_torch_missing_kernel_is_unsupported_with_op_and_dtype():
    e = RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\'')
    assert classify_exception(e) == (Status.UNSUPPORTED, "addmm_impl_cpu_", "Half")


def test_ort_missing_kernel_names_op_and_node():
    e = RuntimeError("NOT_IMPLEMENTED : Could not find an implementation for Gemm(13) node with name 'node_linear'")
    status, op, _ = classify_exception(e)
    assert status == Status.UNSUPPORTED and op == "Gemm (node node_linear)"


def test_ort_type_error_on_load_is_unsupported():
    e = RuntimeError("Type Error: Type 'tensor(bfloat16)' of input parameter (x) of operator (Conv) in node "
                     "(node_conv2d) is invalid.")
    assert classify_exception(e)[:2] == (Status.UNSUPPORTED, "Conv (node node_conv2d)")


def test_other_errors_are_errors_and_explicit_unsupported_keeps_its_op():
    assert classify_exception(ValueError("shapes do not match"))[0] == Status.ERROR
    assert classify_exception(Unsupported("no", op="tanh", dtype="fp64")) == (Status.UNSUPPORTED, "tanh", "fp64")


def test_an_exception_from_fpdiffs_own_code_is_an_internal_error_with_its_traceback():
    from fpdiff.core import compare
    from fpdiff.runtime.worker import INTERNAL, failure
    try:
        compare.mantissa_bits("not a dtype")  # fpdiff's own code fails inside
    except Exception as e:
        r = failure(e, "run", "ort")
    assert r.status == Status.ERROR and r.component == INTERNAL
    assert "Traceback" in r.traceback and "compare.py" in r.traceback


def test_a_model_that_fails_to_load_in_a_worker_is_the_models_error_not_fpdiffs(tmp_path):
    """A spec whose model() raises (a package the route's interpreter lacks) is said as the spec's UsageError."""
    from fpdiff.runtime.worker import INTERNAL, failure
    from fpdiff.sources import load
    spec = tmp_path / "needs.py"
    spec.write_text("def model():\n    import no_such_package_here\n\ndef inputs():\n    return ()\n")
    try:
        load(str(spec)).module  # noqa: B018  (loading is what raises)
    except Exception as e:
        r = failure(e, "load model", "fpdiff worker")
    assert r.status == Status.ERROR and r.component == "fpdiff worker" != INTERNAL, r.component
    assert "No module named 'no_such_package_here'" in r.message and r.traceback is None


def test_a_components_exception_inside_a_stage_is_charged_to_it_without_color_codes():
    from fpdiff.core import errors
    from fpdiff.runtime.worker import failure
    try:
        with errors.stage(errors.IMPORT, "iree fx importer"):
            import json
            json.loads("\x1b[31m{not json\x1b[0m")  # raised inside a component, not fpdiff
    except Exception as e:
        r = failure(e, "prepare", "iree")
    assert (r.status, r.stage, r.component) == (Status.ERROR, "import", "iree fx importer")
    assert "\x1b" not in r.message and r.traceback is None


def test_a_declared_refusal_inside_a_stage_stays_unsupported_and_names_the_stage():
    from fpdiff.core import errors
    from fpdiff.runtime.worker import failure
    try:
        with errors.stage(errors.COMPILE, "iree-compile"):
            raise errors.Unsupported("failed to legalize operation 'math.erf'", op="math.erf", dtype="fp64")
    except Exception as e:
        r = failure(e, "prepare", "iree")
    assert (r.status, r.stage, r.component, r.op) == (Status.UNSUPPORTED, "compile", "iree-compile", "math.erf")


def test_a_sigkill_names_memory():
    """A worker killed while the kernel's out-of-memory count rose is said to have run out of memory; any other
    SIGKILL names memory as the likely cause; other signals are named as they are."""
    import signal

    from fpdiff.runtime.worker import exit_text, oom_kills
    now = oom_kills()
    if now is not None:
        assert "killed by the kernel for memory" in exit_text(-signal.SIGKILL, now - 1)
        assert "likely cause is memory" in exit_text(-signal.SIGKILL, now)
    assert "likely cause is memory" in exit_text(-signal.SIGKILL)
    assert exit_text(-signal.SIGSEGV) == "killed by SIGSEGV" and exit_text(3) == "exit code 3"


def test_torchs_own_dtype_refusals_are_unsupported():
    """fft at fp16 and linalg below float32: torch itself has no kernel at that dtype, a support fact."""
    cases = {"Unsupported dtype Half": (None, "Half"),
             "linalg.inv: Low precision dtypes not supported. Got BFloat16": ("linalg.inv", "BFloat16"),
             "This function doesn't handle types other than float and double": (None, None)}
    for text, (op, dtype) in cases.items():
        assert classify_exception(RuntimeError(text)) == (Status.UNSUPPORTED, op, dtype), text
    assert classify_exception(RuntimeError("Unsupported dtype in my own code path"))[0] == Status.ERROR


def test_a_backend_that_writes_into_its_inputs_is_said_to_and_one_that_does_not_is_not():
    import numpy as np
    import torch

    from fpdiff.runtime.worker import _kept, _overwritten
    inputs = (torch.arange(6.0).reshape(2, 3), torch.tensor([1, 2]), np.ones(3, dtype=np.float32), "a name")
    kept = _kept(inputs)
    assert _overwritten(inputs, kept) == []
    inputs[0].add_(torch.tensor([[0.0, 0.5, 0.0], [0.0, 0.0, 0.0]]))  # what an in-place fused add does
    inputs[2][1] = np.nan
    (f,) = _overwritten(inputs, kept)
    assert f.kind == "inputs-overwritten" and "input 0 (by up to 0.5)" in f.message and "input 2" in f.message
    assert "input 1" not in f.message


def test_every_job_gets_inputs_of_its_own():
    import torch

    from fpdiff.core import precision as prec
    from fpdiff.runtime.task import Task

    class Source:
        inputs = (torch.ones(2, 3), torch.ones(2, dtype=torch.int64))
    for p in (prec.FP32, prec.get("fp16")):
        task = Task.__new__(Task)
        task.source, task.precision = Source(), p
        first = task.inputs()
        first[0].add_(1)
        first[1].add_(1)
        assert torch.equal(Source.inputs[0], torch.ones(2, 3)) and int(Source.inputs[1].sum()) == 2


def test_a_quantizer_that_trips_over_a_missing_kernel_failed_itself():
    from fpdiff.core.errors import QUANTIZE, StageError
    e = StageError(QUANTIZE, "X86InductorQuantizer (PT2E)", 'NotImplementedError: "histogram_cpu" not implemented '
                   "for 'Long'")
    assert classify_exception(e)[0] == Status.ERROR
    assert classify_exception(Unsupported("no int4 path", dtype="int4-weight"))[0] == Status.UNSUPPORTED
