"""locate on the user's own converted file: the file is judged whole against the source's float64 first (as check
judges it). Neither a .pte nor a .tflite lets a delegate's intermediates out (XNNPACK keeps them to itself, and
ExecuTorch's ETDump logs no fp16 tensor), so the file itself cannot be cut: the departure is localized by the
source's ops, each segment converted by fpdiff the way the cell converts, and the result says whether fpdiff's
conversion departs as the file does (then the segment stands for the file) or not (then the difference lies in how
the file was made: its converter, settings or quantization)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fpdiff.analysis.options import RunOptions
from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import make_grid
from fpdiff.judging.rejudge import judge_grid
from fpdiff.judging.run import worker_env
from fpdiff.runtime import external

# fpdiff's conversion departs "as the file does" when both fail and their errors are within this factor of each
# other: a backend's own kernels on the same graph land within a few times of one another, a converter setting
# (fp16 weights, another partition) moves the error by orders of magnitude
SAME_DEPARTURE = 4.0
LOCALIZED_BY = ("the source's ops: each segment converted by fpdiff as this backend's cell converts it (the file's "
                "own intermediates are not exposed by its runtime)")


@dataclass
class FileVerdict:
    """The user's file judged whole: its cell, as check judges it; `finding` when nothing departs."""
    path: str
    cell: Cell
    finding: compare.Finding | None = None

    @property
    def rel_l2(self) -> float | None:
        value = (self.cell.metrics or {}).get("rel_l2")
        return float(value) if value is not None else None

    def as_dict(self) -> dict:
        return {"path": self.path, "status": str(self.cell.status), "rel_l2": self.rel_l2,
                "reason": self.cell.reason or "", "localized_by": LOCALIZED_BY}


def judge_file(model: str, artifact: str, backend: str, precision: str, shared: RunOptions) -> FileVerdict:
    """The file's cell, judged on the judging floor as check judges it; a file that holds gets the note that there
    is nothing to locate."""
    p, shared = prec.get(precision).name, shared.ready()
    grid = make_grid(model, shared.registry, shared.grid(precisions=(p,), artifacts=(f"{backend}:{p}={artifact}",)))
    env = worker_env()
    with external.shared(env):
        cells = judge_grid(grid, env, shared.timeout, None, None).cells
    cell = next(c for c in cells if c.backend == backend)
    said = FileVerdict(artifact, cell)
    if cell.status in (Status.PASS, Status.PRECISION_LOSS):
        said.finding = compare.Finding("note", f"the file {artifact} is {cell.status} at {p} ({cell.reason}): "
                                       "nothing departs to locate")
    return said


def reading(said: FileVerdict, result: Any) -> compare.Finding:
    """Whether the segment found on fpdiff's conversion stands for the user's file."""
    mine, theirs = result.output_error, said.rel_l2
    both = mine is not None and theirs is not None and math.isfinite(mine) and math.isfinite(theirs) and mine > 0
    same = both and result.segment is not None and max(mine, theirs) <= SAME_DEPARTURE * min(mine, theirs)
    why = (said.cell.reason or "").split("; ")[0]  # the verdict's own clause; the rest is in the JSON
    head = f"the file {said.path} is {said.cell.status} at {said.cell.precision} ({why}); localized by {LOCALIZED_BY}"
    if same:
        return compare.Finding("note", f"{head}: fpdiff's conversion departs as the file does (rel L2 {mine:.2e} "
                               f"against the file's {theirs:.2e}), so the segment found stands for the file")
    shown = f"{mine:.2e}" if mine is not None else "no answer"
    return compare.Finding("note", f"{head}: fpdiff's conversion does not depart as the file does (rel L2 {shown} "
                           f"against the file's {theirs if theirs is None else f'{theirs:.2e}'}): the difference lies "
                           "in how the file was made (its converter, settings or quantization), which the source's "
                           "segments cannot show", remedy="convert the source again with the file's settings, or "
                           "compare the converter's options with fpdiff's (--backend-flag)")
