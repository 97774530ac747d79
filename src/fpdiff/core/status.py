"""One vocabulary of statuses for jobs and cells; its values are the strings the JSON report has always carried."""
from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """A cell's status (a verdict from compare, or what happened to the job), or a job's "ok"."""
    PASS = "pass"
    PRECISION_LOSS = "precision-loss"
    MISMATCH = "mismatch"
    # the float64 judge failed its cross-check on this model (check/judge.py) and the cell departs from the judge
    # but not from the independent implementation: neither reading can stand alone, so no verdict is claimed
    UNJUDGED = "unjudged"
    # the cell departs from the float64 reference no more than the reference itself moves when its inputs and
    # weights are perturbed at the cell's unit roundoff (check/conditioning.py): the model cannot answer at this
    # input, rounding alone explains the departure. Not a failure; `--strict` fails on it
    ILL_CONDITIONED = "ill-conditioned"
    UNSUPPORTED = "unsupported"  # a declared refusal (errors.Unsupported)
    # a component (exporter, converter, compiler, runtime) or fpdiff itself failed without declaring a refusal; it is
    # not `unsupported` (which means "this backend says it cannot") and, like a crash, fails the run
    ERROR = "error"
    CRASH = "crash"  # the worker process died
    TIMEOUT = "timeout"  # no answer within the cell's timeout
    OK = "ok"  # a job that ran; its cell's verdict comes from compare

    __str__ = str.__str__  # "pass" in messages and f-strings, on every Python version
    __format__ = str.__format__


CELL_STATUSES = tuple(s for s in Status if s is not Status.OK)
FAILING = (Status.MISMATCH, Status.ERROR, Status.CRASH, Status.TIMEOUT)  # these make a run exit 1
# cells that say nothing about the numbers: no verdict was reached. A run where every cell is one of these judged
# nothing, and exits NOTHING_JUDGED (not 0: "no failure" would read as "the numbers hold")
NOT_JUDGED = (Status.UNJUDGED, Status.UNSUPPORTED, Status.ERROR, Status.CRASH, Status.TIMEOUT)
NOTHING_JUDGED = 3  # the exit code of such a run (0 all judged cells hold, 1 a cell failed, 2 usage error)
# with --strict a cell must also pass without these findings: a pass that computed another format than asked
STRICT_FINDINGS = ("dtype-changed", "coarser-than-requested")


def fails(status: str, finding_kinds, strict: bool = False) -> bool:
    """Whether a cell fails the run: a failing status, or under --strict anything but a clean pass."""
    if strict:
        return status != Status.PASS or any(k in STRICT_FINDINGS for k in finding_kinds)
    return status in FAILING
