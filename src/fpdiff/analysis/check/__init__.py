"""The grid: every (backend, device, precision, shape variant) cell judged against float64 and its baseline.
check() reads as its steps, each on the judging floor: the grid (judging/grid.py), running and judging it
(judging/rejudge.py: the jobs, the judge's cross-check, each cell's first verdict and the rules that revise it)."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from fpdiff.analysis.check.explain import next_commands
from fpdiff.analysis.check.result import Cell, CheckResult
from fpdiff.analysis.options import RunOptions
from fpdiff.core import precision as prec
from fpdiff.core.versions import report_versions
from fpdiff.judging import evidence
from fpdiff.judging.grid import Grid, make_grid
from fpdiff.judging.rejudge import judge_grid
from fpdiff.judging.run import worker_env
from fpdiff.runtime import external, rundir
from fpdiff.runtime.worker import JobResult

__all__ = ["Cell", "CheckOptions", "CheckResult", "DEFAULT_BACKENDS", "DEFAULT_REPEAT", "check"]

DEFAULT_BACKENDS = ("torch", "inductor", "ort", "iree")
# Each cell runs its prepared model twice and flags `nondeterministic` when the outputs differ bitwise: a second
# run costs no compile, and a backend that answers differently each time makes every verdict a sample of one.
DEFAULT_REPEAT = 2


@dataclass(frozen=True)
class CheckOptions:
    """check's own options (what every analysis shares is RunOptions). `repro_dir`: where the op an overruled judge
    gets wrong is written (None: not written). `artifacts`: the user's converted files, "BACKEND[:PRECISION]=PATH",
    each run on its backend in place of fpdiff's conversion and judged at the precision the file computes in (read
    from it, unless named)."""
    backends: Sequence[str] = DEFAULT_BACKENDS
    precisions: Sequence[str] = prec.DEFAULT_PRECISIONS
    devices: Sequence[str] = ("cpu",)
    shape_variants: Sequence[str] | None = None
    allow_nonfinite: bool = False
    repeat: int = DEFAULT_REPEAT
    keep_opset: bool = False
    repro_dir: str | None = "fpdiff-out"
    artifacts: Sequence[str] = ()


@rundir.scoped
def check(model: str, options: CheckOptions | None = None, shared: RunOptions | None = None) -> CheckResult:
    """Run the grid and judge every cell."""
    t_start = time.perf_counter()
    o, shared = options or CheckOptions(), (shared or RunOptions()).ready()
    reg = shared.registry
    grid = make_grid(model, reg, shared.grid(
        backends=tuple(o.backends), precisions=tuple(o.precisions), devices=tuple(o.devices),
        shape_variants=tuple(o.shape_variants) if o.shape_variants else None, allow_nonfinite=o.allow_nonfinite,
        repeat=o.repeat, artifacts=tuple(o.artifacts), load_args={"keep_opset": o.keep_opset}))
    env = worker_env()
    with external.shared(env):  # one pool for the run: the grid's jobs and every job a rule asks for
        ev, cells, ref = judge_grid(grid, env, shared.timeout, shared.progress, o.repro_dir)
    modules = [m for b in dict.fromkeys(k.backend for k in ev.results) for m in reg.cls(b).requires]  # all that ran
    return CheckResult(grid.source.ref.label, cells, _reference(grid, ref), report_versions(modules),
                       time.perf_counter() - t_start, judge=ev.verdict.as_dict(), source=dict(grid.source.notes),
                       fingerprint=grid.source.fingerprint, evidence=evidence.save(ev),
                       next=next_commands(grid, cells, shared))


def _reference(grid: Grid, ref: JobResult) -> dict:
    """The float64 reference as the report shows it, with its findings (the model's own casts, fpdiff's
    decompositions)."""
    return {"backend": grid.judge_backend, "device": "cpu", "dtype": "float64",
            "outputs": [list(a.shape) for a in ref.outputs or []], "duration_s": round(ref.prepare_s + ref.run_s, 3),
            "findings": [f.as_dict() for f in ref.notes]}
