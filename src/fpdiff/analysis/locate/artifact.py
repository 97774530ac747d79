"""locate on the user's own converted file: the file is judged whole against the source's float64 first (as check
judges it). Neither a .pte nor a .tflite lets a delegate's intermediates out (XNNPACK keeps them to itself, and
ExecuTorch's ETDump logs no fp16 tensor), so the file itself cannot be cut: the departure is localized by the
source's ops, each segment converted by fpdiff the way the cell converts, and the result says whether fpdiff's
conversion departs as the file does (then the segment stands for the file) or not (then the difference lies in how
the file was made: its converter, settings or quantization)."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.status import Status

# fpdiff's conversion departs "as the file does" when both fail and their errors are within this factor of each
# other: a backend's own kernels on the same graph land within a few times of one another, a converter setting
# (fp16 weights, another partition) moves the error by orders of magnitude
SAME_DEPARTURE = 4.0
LOCALIZED_BY = ("the source's ops: each segment converted by fpdiff as this backend's cell converts it (the file's "
                "own intermediates are not exposed by its runtime)")


def locate_artifact(locate: Callable[..., Any], model: str, artifact: str, *, backend: str, precision: str,
                    backend_flags: Mapping[str, Sequence[str]] | None, **kw: Any) -> Any:
    """The file's verdict, then locate on the source with the backend's own conversion, read against it."""
    from fpdiff.analysis.check import check
    p = prec.get(precision)
    cell = _file_cell(check, model, artifact, backend, p.name, backend_flags, kw)
    said = {"path": artifact, "status": str(cell.status), "rel_l2": _rel_l2(cell), "reason": cell.reason,
            "localized_by": LOCALIZED_BY}
    if cell.status in (Status.PASS, Status.PRECISION_LOSS):
        from fpdiff.analysis.locate import LocateResult
        result = LocateResult(model, backend, p.name, output_error=_rel_l2(cell), artifact=said)
        result.findings.append(compare.Finding("note", f"the file {artifact} is {cell.status} at {p.name} "
                                               f"({cell.reason}): nothing departs to locate"))
        return result
    result = locate(model, backend=backend, precision=p.name, backend_flags=backend_flags, **kw)
    result.artifact = said
    result.findings.insert(0, _reading(said, result, p.name))
    return result


def _file_cell(check: Callable[..., Any], model: str, artifact: str, backend: str, precision: str,
               backend_flags: Mapping[str, Sequence[str]] | None, kw: dict[str, Any]) -> Any:
    """The file's cell, judged as check judges it."""
    passed = {k: kw[k] for k in ("seed", "plugins", "timeout", "cache_dir", "inputs", "shapes") if k in kw}
    r = check(model, backends=[], precisions=[precision], artifacts=[f"{backend}:{precision}={artifact}"],
              backend_flags=backend_flags, repeat=1, repro_dir=None, **passed)
    return next(c for c in r.cells if c.backend == backend)


def _rel_l2(cell: Any) -> float | None:
    value = (cell.metrics or {}).get("rel_l2")
    return float(value) if value is not None else None


def _reading(said: dict, result: Any, precision: str) -> compare.Finding:
    """Whether the segment found on fpdiff's conversion stands for the user's file."""
    mine, theirs = result.output_error, said["rel_l2"]
    both = mine is not None and theirs is not None and math.isfinite(mine) and math.isfinite(theirs) and mine > 0
    same = both and result.segment is not None and max(mine, theirs) <= SAME_DEPARTURE * min(mine, theirs)
    why = (said["reason"] or "").split("; ")[0]  # the verdict's own clause; the rest is in the JSON
    head = f"the file {said['path']} is {said['status']} at {precision} ({why}); localized by {LOCALIZED_BY}"
    if same:
        return compare.Finding("note", f"{head}: fpdiff's conversion departs as the file does (rel L2 {mine:.2e} "
                               f"against the file's {theirs:.2e}), so the segment found stands for the file")
    shown = f"{mine:.2e}" if mine is not None else "no answer"
    return compare.Finding("note", f"{head}: fpdiff's conversion does not depart as the file does (rel L2 {shown} "
                           f"against the file's {theirs if theirs is None else f'{theirs:.2e}'}): the difference lies "
                           "in how the file was made (its converter, settings or quantization), which the source's "
                           "segments cannot show", remedy="convert the source again with the file's settings, or "
                           "compare the converter's options with fpdiff's (--backend-flag)")
