"""Mark-all's reading of job results: a backend's failure is its answer, fpdiff's own failure in a worker raises."""
import numpy as np
import pytest

from fpdiff.core import precision as prec
from fpdiff.core.precision import get
from fpdiff.core.status import Status
from fpdiff.judging import markall
from fpdiff.model.graph import STATIC
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import INTERNAL, JobResult
from fpdiff.sources import SourceRef

JOB = Job(SourceRef("onnx", "m.onnx", "m"), "data.pt", "some-backend", prec.FP32, "cpu", STATIC)


def answering(results: dict):
    """A pool that answers each backend's marked job with the given result, and records what it was asked."""
    asked = []

    def run(job):
        asked.append(job)
        return results[(job.backend, job.precision.name)]
    run.asked = asked
    return run


def ok(**values):
    return JobResult(Status.OK, outputs=[np.asarray(v, np.float64) for v in values.values()],
                     output_names=list(values))


def test_a_crash_is_the_backends_answer():
    run = answering({("judge", "fp64"): ok(a=[1.0, 2.0]), ("some-backend", "fp32"): JobResult(Status.CRASH,
                                                                                                message="died")})
    found = markall.mark_all(run, JOB, "judge", get("fp32"), {})
    assert found.status == Status.CRASH and found.refused == "died" and not found.rows
    assert all(j.mode == markall.MARKED and j.repeat == 1 for j in run.asked)
    assert [(j.backend, j.device, j.flags) for j in run.asked][0] == ("judge", "cpu", ())


def test_fpdiffs_own_error_in_a_worker_raises_never_becomes_no_baseline():
    bug = JobResult(Status.ERROR, message="KeyError: 'x'", component=INTERNAL, traceback="Traceback ...")
    run = answering({("judge", "fp64"): ok(a=[1.0, 2.0]), ("some-backend", "fp32"): ok(a=[1.0, 2.5]),
                     ("judge", "fp32"): bug})
    with pytest.raises(RuntimeError, match="internal error in fpdiff.*KeyError"):
        markall.mark_all(run, JOB, "judge", get("fp32"), {})


def test_the_first_mismatch_against_the_baseline_is_where_the_backend_departs():
    run = answering({("judge", "fp64"): ok(a=[1.0, 2.0], b=[3.0, 4.0]), ("some-backend", "fp32"): ok(a=[1.0, 2.0],
                     b=[3.0, 4.5]), ("judge", "fp32"): ok(a=[1.0, 2.0], b=[3.0, 4.0 + 1e-7])})
    found = markall.mark_all(run, JOB, "judge", get("fp32"), {"b": ("n2", "Mul")})
    assert [r.status for r in found.rows] == [Status.PASS, Status.MISMATCH] and found.no_baseline is None
    assert found.first_departure.tensor == "b" and found.first_departure.op == "Mul"


def test_a_refused_baseline_is_said_and_no_row_is_called_a_mismatch_without_one():
    refused = JobResult(Status.UNSUPPORTED, message="no float32 kernel")
    run = answering({("judge", "fp64"): ok(a=[1.0, 2.0], b=[3.0]), ("some-backend", "fp32"): ok(a=[1.0, 2.5], b=[3.0]),
                     ("judge", "fp32"): refused})
    found = markall.mark_all(run, JOB, "judge", get("fp32"), {"a": ("n1", "Add")})
    assert "no float32 kernel" in found.no_baseline and found.tensors == 2
    assert found.rows[0].status == Status.PRECISION_LOSS and found.rows[0].baseline_rel_l2 is None
    assert found.first_departure is None
