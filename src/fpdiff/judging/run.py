"""Runs a grid's jobs in worker pools, the float64 reference first: a check whose reference fails stops there, with
one line saying why, before any cell is run for nothing."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace

from fpdiff.core.errors import ReferenceFailed
from fpdiff.core.status import Status
from fpdiff.judging.grid import CellKey, Grid
from fpdiff.runtime import external
from fpdiff.runtime import progress as segments
from fpdiff.runtime.worker import JobResult

Progress = Callable[[str, int, int], None]


def worker_env() -> dict[str, str]:
    """What every worker of a check gets: the threads this machine has, unless the user set them, and where to tell
    the segments done inside a long cell when progress is shown."""
    return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1)), **segments.worker_env()}


def run_grid(grid: Grid, timeout: float, env: dict, progress: Progress | None) -> tuple[dict, JobResult]:
    """Every job of the grid, in order: (results by job key, the float64 reference's result)."""
    order = grid.order()
    results: dict[CellKey, JobResult] = {}
    with external.pool(env) as pool:
        if progress and grid.judge_flags:  # the judge's own reference can be the longest job of all: said first
            progress(f"{grid.judge_backend} cpu fp64 reference", 0, len(order))
        ref = _apart_reference(grid, pool, timeout)
        for i, key in enumerate(order):
            if progress:
                progress(str(key), i, len(order))
            results[key] = pool.run(grid.job(key), timeout)
            if ref is None:  # the first job is the reference when the judge does not run it apart
                ref = _reference(results[key], key.backend, grid.source.ref.kind)
        if progress:
            progress("done", len(order), len(order))
    return results, ref


def _apart_reference(grid: Grid, pool, timeout: float) -> JobResult | None:
    """The judge's float64 reference as a job of its own when the judge declares judge_flags, else None."""
    if not grid.judge_flags:
        return None
    job = replace(grid.job(grid.reference), flags=grid.judge_flags, repeat=1)
    return _reference(pool.run(job, timeout), grid.judge_backend, grid.source.ref.kind)


def _reference(r: JobResult, backend: str, kind: str) -> JobResult:
    """The reference's result. A torch model's float64 run failing ends the check (the model does not run in float64:
    nothing stands in for it); the ONNX reference evaluator failing is the judge's own failure: the cells run, and
    independent implementations may stand in for it (judge.stand_in_majority)."""
    if r.status != Status.OK and kind != "onnx":
        raise ReferenceFailed(f"the float64 reference ({backend} on cpu) failed: {r.message}")
    return r


def reference(grid: Grid, pool, timeout: float) -> JobResult:
    """The float64 reference alone, for an analysis that judges its own jobs against it (quant); a reference that
    did not run through ends it with one line, whatever the model's kind (nothing stands in for it there)."""
    r = _apart_reference(grid, pool, timeout) or _reference(pool.run(grid.job(grid.reference), timeout),
                                                            grid.judge_backend, grid.source.ref.kind)
    if r.status != Status.OK:
        raise ReferenceFailed(f"the float64 reference ({grid.judge_backend} on cpu) failed: {r.message}")
    return r
