"""Every number plan reports is a job on the named backend, in a worker: trials of mixed programs, the speed
figure, the autocast remedy and the exported graph's verification (a backend that runs modules in process, torch
eager, runs its trials and speed figure here: torch_models.TorchTrials). A refusal, crash or timeout is that job's
status; an error of fpdiff's own code in the worker raises here."""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from fpdiff.analysis.plan.search import AutocastRemedy, Speed, Trial, Verification, rel_l2
from fpdiff.backends.base import ONNX, PROGRAM
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding
from fpdiff.core.status import Status
from fpdiff.model import graph
from fpdiff.runtime import jobdata, rundir
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import INTERNAL, JobResult
from fpdiff.sources import SourceRef, digest

SPEED_RUNS = 6  # runs of each timed program: the first warms up, the median of the others is reported
# Where a keep-set is run again when the plan's backend computes the precision wider: the judge runs on the CPU, where
# the ONNX reference evaluator runs at all and torch eager rounds every op to the precision as on any device.
VERIFY_DEVICE = "cpu"


class InternalError(RuntimeError):
    """fpdiff's own code failed inside a worker: a bug to fix, never a backend's answer about a keep-set."""



class ProgramFile(NamedTuple):
    """A program file and what it is fed: its inputs by name, and the custom ops' modules it calls."""
    path: Path
    inputs: Sequence
    input_names: Sequence[str]
    requires: tuple[str, ...] = ()

class Jobs:
    """The plan's jobs, sent through one router (a local worker, or the backend's route) and kept apart from
    this process: a backend that crashes costs one job."""

    def __init__(self, device: str, plugins: tuple[str, ...], flags: dict[str, tuple[str, ...]], timeout: float,
                 cache: str | None, reg=None) -> None:
        self.device, self.plugins, self.flags, self.timeout, self.cache = device, plugins, flags, timeout, cache
        self._reg = reg  # the run's registry (RunOptions.ready); built from the plugins when not given
        self.dir = rundir.mkdtemp(prefix="fpdiff-plan-")
        self.count = 0
        self.verification: Verification | None = None  # where_computed()'s: trials then pass only there too
        self._router = None
        self._source_data: str | None = None

    @property
    def reg(self):
        """The run's backend registry."""
        if self._reg is None:
            from fpdiff.backends import registry
            self._reg = registry(self.plugins)
        return self._reg

    def path(self, name: str, suffix: str) -> Path:
        """A fresh file name in the plan's scratch folder."""
        self.count += 1
        return self.dir / f"{name}-{self.count}{suffix}"

    def program(self, backend: str, file: ProgramFile, repeat: int = 1, device: str | None = None,
                precision: prec.Precision = prec.FP32, artifact: Path | None = None) -> JobResult:
        """A program file run as written on `backend` (fp32 in and out, its own casts inside; at another
        `precision` its float inputs are fed in that dtype). With `artifact`, the backend runs that converted file
        of the program (an exported plan) as a user's own, fed the program's inputs."""
        path = file.path
        data = jobdata.write(self.path(path.stem, ".data.pt"), inputs=file.inputs, input_names=file.input_names,
                             fingerprint=digest(path.read_bytes()))
        ref = SourceRef(PROGRAM, str(path), f"plan program {path.stem}", requires=file.requires)
        return self._run(Job(ref, data, backend, precision,
                             device or self.device, graph.STATIC, self.plugins, self.flags.get(backend, ()),
                             self.cache, repeat=repeat, artifact=str(artifact) if artifact else None))

    def cell(self, backend: str, source, data: str, precision: prec.Precision, repeat: int = 1) -> JobResult:
        """The model itself at `precision` on `backend`: the job check sends for that cell."""
        return self._run(Job(source.ref, data, backend, precision, self.device, graph.STATIC, self.plugins,
                             self.flags.get(backend, ()), self.cache, repeat=repeat))

    def source_data(self, source) -> str:
        """The model's job data, written once; a torch model's weights written once per run and mapped by every
        worker (and by this process's model)."""
        if self._source_data is None:
            self._source_data = jobdata.of_source(self.dir / "source.data.pt", source)
        return self._source_data

    def where_computed(self, reg, backend: str, source, p: prec.Precision) -> Verification | None:
        """Where `p` is really computed, when not on `backend`: the model kind's judge at `p` (check's per-precision
        baseline: torch eager, or the ONNX reference evaluator, whose numpy rounds each elementwise op to `p` and
        MatMul, Conv and reductions once after a float32 sum, as GPU kernels do). None: `backend` computes `p`
        itself: its own cell at `p` is not dtype-changed as check judges it, or it is the judge, or it runs a torch
        model's keep-sets here (eager: each op in the dtype the program gives it). A cell that did not run shows
        nothing of its dtype: the judge verifies then too."""
        from fpdiff.backends import judge_for
        judge = judge_for(source.ref.kind)
        if backend == judge or (source.ref.kind != ONNX and reg.cls(backend).implements("prepare_module")):
            return None
        r = self.cell(backend, source, self.source_data(source), p)
        if r.status != Status.OK:
            return Verification(judge, p.name, f"nothing shows {backend} computes {p.name}: its own {p.name} cell "
                                               f"did not run ({r.status}: {failure(r)[:200]})")
        found = dtype_finding(backend, p, r)
        return None if found is None else Verification(judge, p.name,
                                                       f"{backend} computes {p.name} wider: {found.message}")

    def _run(self, job: Job) -> JobResult:
        if self._router is None:
            from fpdiff.runtime.external import Router
            self._router = Router()
        r = self._router.run(job, self.timeout)
        if r.component == INTERNAL:
            raise InternalError(f"{r.message} (in a {job.backend} job at {r.stage or 'an unknown stage'})\n"
                                f"{r.traceback or ''}")
        return r

    def close(self) -> None:
        if self._router is not None:
            self._router.close()
            self._router = None


def dtype_finding(backend: str, p: prec.Precision, r: JobResult) -> Finding | None:
    """check's dtype-changed rule (judging/cells.py) on a cell's job: a plugin's own finding, or most of its
    counted float ops in other dtypes, or other float dtypes returned where it records nothing of what it ran."""
    from fpdiff.core.dtypes import DTYPE_CHANGED, dtype_changed
    own = next((f for f in r.notes if getattr(f, "kind", None) == DTYPE_CHANGED), None)
    if own is not None:
        return own
    want = prec.dtype_name(p.dtype)
    returned = r.output_dtypes if r.computed_dtype != want else []
    return dtype_changed(backend, want, r.op_dtypes, r.planned_op_dtypes, returned, r.dtype_remedy)


def trial(keep, r: JobResult, expected: list, tolerance: float, seconds: float) -> Trial:
    """A keep-set's answer from its job: the error against the float64 outputs, or the job's own status."""
    if r.status != Status.OK:
        return Trial(sorted(keep), math.inf, False, Status(r.status), seconds, reason=failure(r))
    err = error(expected, r)
    return Trial(sorted(keep), err, err <= tolerance, Status.OK, seconds)


def error(expected: list, r: JobResult) -> float:
    """A job's outputs against the float64 outputs the plan is judged by (relative L2)."""
    return rel_l2(expected, [np.asarray(o) for o in r.outputs])


def failure(r: JobResult) -> str:
    """A failed job in one line: who failed, where, and what it said."""
    where = " at ".join(x for x in (r.component, r.stage) if x)
    return f"{where}: {r.message}" if where else r.message


def median_ms(r: JobResult) -> float:
    """Milliseconds of one run: the median of the job's runs after the first (a warm-up)."""
    times = r.run_times[1:] or r.run_times or [r.run_s]
    return statistics.median(times) * 1e3


class ProgramTrials:
    """Keep-sets as program files (one per set, kept for the speed figure and the export), each run as a job on
    the plan's backend and judged against the float64 outputs."""
    suffix = ""
    requires: tuple[str, ...] = ()  # imports a worker needs to load the program files (sources.program.op_modules)

    def __init__(self, jobs: Jobs, backend: str, inputs: Sequence, input_names: Sequence[str], expected: list,
                 tolerance: float, units: Sequence[str]) -> None:
        self.jobs, self.backend, self.expected, self.tolerance = jobs, backend, expected, tolerance
        self.inputs, self.input_names, self.units = tuple(inputs), list(input_names), frozenset(units)
        self._files: dict[frozenset[str], Path] = {}

    def write(self, keep: frozenset[str], path: Path) -> None:
        """Save the program computing at the low precision except `keep` (in fp32) at `path`."""
        raise NotImplementedError

    def program(self, keep) -> Path:
        key = frozenset(keep)
        if key not in self._files:
            path = self.jobs.path("trial", self.suffix)
            self.write(key, path)
            self._files[key] = path
        return self._files[key]

    def file(self, keep: frozenset[str]) -> ProgramFile:
        """The keep-set's program file with what it is fed."""
        return ProgramFile(self.program(keep), self.inputs, self.input_names, self.requires)

    def __call__(self, keep: frozenset[str]) -> Trial:
        t0 = time.perf_counter()
        r = self.jobs.program(self.backend, self.file(keep))
        return self.verified(trial(keep, r, self.expected, self.tolerance, time.perf_counter() - t0), keep, t0)

    def verified(self, t: Trial, keep, t0: float) -> Trial:
        """A keep-set that passed on the plan's backend, run again where the precision is really computed when that
        backend computes it wider (jobs.verification): it passes only if it meets the tolerance there too."""
        v = self.jobs.verification
        if v is None or not t.passed:
            return t
        r = self.verify_run(keep, v.backend)
        if r.status != Status.OK:
            t.passed, t.verifier_error = False, math.inf
            t.reason = f"not verified in real {v.precision} on {v.backend}: {r.status}: {failure(r)}"
        else:
            t.verifier_error = error(self.expected, r)
            t.passed = t.verifier_error <= self.tolerance
            if not t.passed:
                t.reason = f"fails in real {v.precision} on {v.backend}: error {t.verifier_error:.3g}"
        t.seconds = time.perf_counter() - t0
        return t

    def verify_run(self, keep, backend: str) -> JobResult:
        """The keep-set's program on `backend`, the judge, on the CPU (VERIFY_DEVICE)."""
        return self.jobs.program(backend, self.file(keep), device=VERIFY_DEVICE)

    def run(self, keep, repeat: int) -> JobResult:
        """The keep-set's program again, `repeat` times (the speed figure)."""
        return self.jobs.program(self.backend, self.file(keep), repeat=repeat)


def speed(trials: ProgramTrials, keep, low: prec.Precision) -> Speed:
    """The planned program, the pure low precision and every op in fp32, each timed in its own job: the backend's
    prepared run, repeated, the first run left out as a warm-up."""
    sets = {prec.FP32.name: trials.units, low.name: frozenset(), "plan": frozenset(keep)}
    done: dict[frozenset[str], JobResult] = {}
    ms, refused = {}, {}
    for name, k in sets.items():
        if k not in done:
            done[k] = trials.run(k, SPEED_RUNS)
        r = done[k]
        if r.status == Status.OK:
            ms[name] = median_ms(r)
        else:
            refused[name] = f"{r.status}: {failure(r)}"
    plan = ms.get("plan")

    def vs(other: str) -> float | None:
        return ms[other] / plan if plan and other in ms else None
    return Speed(f"{trials.backend} {trials.jobs.device}", ms, vs(prec.FP32.name), vs(low.name), refused)


def autocast_remedy(jobs: Jobs, backend: str, source, expected: list, low: prec.Precision, tolerance: float,
                    fp32_ms: float | None, timed: bool) -> AutocastRemedy:
    """The backend's own amp cell at the plan's low dtype (the job check sends for it), judged by the plan's
    tolerance against the same float64 outputs; timed beside fp32 when the speed figure is asked for."""
    p = prec.autocast_of(low)
    amp = p.name
    r = jobs.cell(backend, source, jobs.source_data(source), p, repeat=SPEED_RUNS if timed else 1)
    if r.status != Status.OK:
        return AutocastRemedy(amp, status=Status(r.status), reason=failure(r), backend=backend)
    err = error(expected, r)
    return AutocastRemedy(amp, error=err, passed=err <= tolerance, ms=median_ms(r) if timed else None,
                          fp32_ms=fp32_ms if timed else None, backend=backend)
