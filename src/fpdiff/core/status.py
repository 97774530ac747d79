"""One vocabulary of statuses for jobs and cells; its values are the strings the JSON report has always carried.
Each status carries its rank (best to worst, for sorting, the worst-of and `fpdiff diff`'s regressions) and how
reports show it (a terminal style, an HTML colour), so no report keeps its own table of status strings."""
from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Status(str, Enum):
    """A cell's status (a verdict from compare, or what happened to the job), or a job's "ok"."""
    PASS = "pass"
    PRECISION_LOSS = "precision-loss"
    # a quantized cell whose backend matches the exact float64 emulation of its quantized model, which itself departs
    # from float64 beyond the format's tolerance: the error is what the format costs (judging/quantized.py)
    QUANTIZATION_LOSS = "quantization-loss"
    MISMATCH = "mismatch"
    # the float64 judge failed its cross-check on this model (judging/judge.py) and the cell departs from the judge
    # but not from the independent implementation: neither reading can stand alone, so no verdict is claimed
    UNJUDGED = "unjudged"
    # the cell departs from the float64 reference no more than the reference itself moves when its inputs and
    # weights are perturbed at the cell's unit roundoff (judging/conditioning.py): the model cannot answer at this
    # input, rounding alone explains the departure. Not a failure; `--strict` fails on it
    ILL_CONDITIONED = "ill-conditioned"
    UNSUPPORTED = "unsupported"  # a declared refusal (errors.Unsupported)
    # a component (exporter, converter, compiler, runtime) or fpdiff itself failed without declaring a refusal; it is
    # not `unsupported` (which means "this backend says it cannot") and, like a crash, fails the run
    ERROR = "error"
    CRASH = "crash"  # the worker process died
    TIMEOUT = "timeout"  # no answer within the cell's timeout
    OK = "ok"  # a job that ran; its cell's verdict comes from compare

    def __str__(self) -> str:  # "pass" in messages and f-strings, on every Python version
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def rank(self) -> int:
        """0 best; a cell moving to a higher rank between two runs is a regression (`fpdiff diff`)."""
        return _LOOK[self][0]

    @property
    def style(self) -> str:
        """How the terminal shows it (rich markup)."""
        return _LOOK[self][1]

    @property
    def colour(self) -> str:
        """Its background in the HTML report."""
        return _LOOK[self][2]


# each status's (rank, terminal style, HTML colour)
_LOOK: dict[Status, tuple[int, str, str]] = {
    Status.PASS: (0, "green", "#c8e6c9"), Status.OK: (0, "green", "#c8e6c9"),
    Status.PRECISION_LOSS: (1, "yellow", "#fff59d"), Status.QUANTIZATION_LOSS: (1, "yellow", "#fff59d"),
    Status.UNJUDGED: (2, "cyan", "#e1bee7"), Status.ILL_CONDITIONED: (2, "blue", "#bbdefb"),
    Status.UNSUPPORTED: (2, "dim", "#e0e0e0"),
    Status.MISMATCH: (3, "bold red", "#ef9a9a"), Status.ERROR: (3, "bold magenta", "#ffab91"),
    Status.CRASH: (3, "bold magenta", "#ffab91"), Status.TIMEOUT: (3, "magenta", "#ffab91")}


def worst(statuses: Iterable[str]) -> Status | None:
    """The worst of some statuses by rank (the first of equal rank); None for none."""
    found = [Status(s) for s in statuses]
    return max(found, key=lambda s: s.rank, default=None)


CELL_STATUSES = tuple(s for s in Status if s is not Status.OK)
FAILING = (Status.MISMATCH, Status.ERROR, Status.CRASH, Status.TIMEOUT)  # these make a run exit 1
# cells that say nothing about the numbers: no verdict was reached. A run where every cell is one of these judged
# nothing, and exits NOTHING_JUDGED (not 0: "no failure" would read as "the numbers hold")
NOT_JUDGED = (Status.UNJUDGED, Status.UNSUPPORTED, Status.ERROR, Status.CRASH, Status.TIMEOUT)
NOTHING_JUDGED = 3  # the exit code of such a run (0 all judged cells hold, 1 a cell failed, 2 usage error)
# with --strict a cell must also pass without these findings: a pass that computed another format than asked, by the
# backend's own record (dtype-changed) or by its numbers (coarser-than-requested, computed-wider)
STRICT_FINDINGS = ("dtype-changed", "coarser-than-requested", "computed-wider")


def fails(status: str, finding_kinds, strict: bool = False) -> bool:
    """Whether a cell fails the run: a failing status, or under --strict anything but a clean pass."""
    if strict:
        return status != Status.PASS or any(k in STRICT_FINDINGS for k in finding_kinds)
    return status in FAILING
