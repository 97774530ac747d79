"""Every float tensor of an ONNX graph judged from one run: the named backend marks them all as outputs in a worker
(Backend.prepare_marked), the float64 judge's marked run gives the expected values and the judge's marked run at the
same precision the baseline. Marking outputs can change what a backend fuses, so a bug that lives in a fusion may
vanish here: the segment bisection is the default for that reason."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import INTERNAL, JobResult

Run = Callable[[Job], JobResult]  # one job through a pool (Router.run with the analysis's timeout)
MARKED = "marked"  # Job.mode: the worker calls prepare_marked instead of prepare_task


@dataclass
class TensorVerdict:
    """One marked tensor: the backend's error at the precision, the baseline's, and the check verdict."""
    tensor: str
    node: str
    op: str
    status: Status
    rel_l2: float
    baseline_rel_l2: float | None
    reason: str


@dataclass
class MarkAll:
    backend: str
    tensors: int
    first_departure: TensorVerdict | None = None  # the first `mismatch` in graph order: where the backend departs
    rows: list[TensorVerdict] = field(default_factory=list)
    refused: str | None = None  # the backend's marked run failed: its words
    status: Status | None = None  # how it failed: unsupported, error, crash or timeout
    stage: str | None = None
    component: str | None = None
    no_baseline: str | None = None  # the judge's run at the precision failed: rows are judged on the tolerance alone

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items()
                if v is not None or k not in ("refused", "status", "stage", "component", "no_baseline")}


def marked(run: Run, job: Job) -> tuple[dict[str, np.ndarray], JobResult]:
    """The job's marked run: {tensor: value} in graph order, empty when the job failed (its result says how). A
    failure in fpdiff's own code is our bug: it raises here with the worker's traceback, never becomes an answer."""
    r = run(replace(job, mode=MARKED, repeat=1))
    if r.component == INTERNAL:
        raise RuntimeError(f"{INTERNAL} in {job.backend}'s marked run ({r.stage}): {r.message}\n{r.traceback or ''}")
    if r.status != Status.OK:
        return {}, r
    if len(r.output_names) != len(r.outputs):
        return {}, JobResult(Status.ERROR, message=f"{job.backend} named {len(r.output_names)} marked tensors for "
                             f"{len(r.outputs)} values", stage="run", component=job.backend)
    return dict(zip(r.output_names, r.outputs)), r


def mark_all(run: Run, job: Job, judge: str, p: prec.Precision, producers: dict[str, tuple[str, str]]) -> MarkAll:
    """Per float tensor in graph order: the backend's error at P and the baseline's, both against float64, with the
    check verdict; the first `mismatch` is where the backend departs. `job` is the backend's job on the ONNX graph at
    P; the judge runs the same graph on the CPU; `producers` names each tensor's (node, op)."""
    if not p.is_cast or p.is_bf16:
        raise UsageError("--mark-all takes fp64, fp32 or fp16")
    at = lambda q: replace(job, backend=judge, precision=q, device="cpu", flags=())  # noqa: E731
    v64, r64 = marked(run, at(prec.FP64))
    if r64.status != Status.OK:
        raise UsageError(f"the float64 judge ({judge}) could not run the model with every tensor marked: "
                         f"{r64.status}: {r64.message}")
    got, r = marked(run, job)
    if r.status != Status.OK:
        return MarkAll(job.backend, 0, refused=r.message, status=Status(r.status), stage=r.stage,
                       component=r.component)
    base, rb = marked(run, at(p))
    found = verdicts(job.backend, got, v64, base, p, producers)
    if rb.status != Status.OK:
        found.no_baseline = f"{judge} at {p.name}: {rb.status}: {rb.message}"
    return found


def verdicts(backend: str, got: dict, v64: dict, base: dict, p: prec.Precision,
             producers: dict[str, tuple[str, str]]) -> MarkAll:
    """Each tensor the backend and the judge both marked, judged as a check cell: against float64 with the baseline's
    error (None where it has none) as the floor."""
    rows, first = [], None
    for name, value in got.items():
        if name not in v64:
            continue
        node, op = producers.get(name, ("", ""))
        row = _verdict(name, node, op, value, v64[name], base.get(name), p)
        rows.append(row)
        if first is None and row.status == Status.MISMATCH:
            first = row
    return MarkAll(backend, len(rows), first, rows)


def _verdict(name: str, node: str, op: str, value, value64, baseline, p: prec.Precision) -> TensorVerdict:
    ref = [np.asarray(value64, dtype=np.float64)]
    value = np.asarray(value, dtype=np.float64)
    if value.shape != ref[0].shape:
        return TensorVerdict(name, node, op, Status.MISMATCH, float("inf"), None,
                             f"shape {list(value.shape)}, float64 has {list(ref[0].shape)}")
    m = compare.measure(ref, [value], p.compute)
    b = None
    if baseline is not None and np.shape(baseline) == ref[0].shape:
        b = compare.measure(ref, [np.asarray(baseline, dtype=np.float64)], p.compute)
    j = compare.judge(m, p, b)
    return TensorVerdict(name, node, op, Status(j.status), m.rel_l2, b.rel_l2 if b else None, j.reason)


def producers(*models) -> dict[str, tuple[str, str]]:
    """{tensor: (node name, op type)} over ONNX graphs (the model's own graph and its opset conversion)."""
    return {o: (n.name, n.op_type) for m in reversed(models) if m is not None for n in m.graph.node for o in n.output}
