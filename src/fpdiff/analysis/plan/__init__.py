"""The few ops to keep in fp32 so a model meets a tolerance at fp16/bf16: found from evidence, then verified. Every
number it reports is the named backend's own, from jobs in a worker (analysis/plan/jobs.py)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fpdiff.analysis.options import RunOptions
from fpdiff.analysis.plan import exports
from fpdiff.analysis.plan.jobs import SPEED_RUNS, Jobs, ProgramTrials, autocast_remedy, median_ms, speed
from fpdiff.analysis.plan.search import Export, ExportRun, Plan, Verification
from fpdiff.backends.base import ONNX
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.runtime import rundir

__all__ = ["Export", "ExportRun", "Plan", "PlanOptions", "plan"]


@dataclass(frozen=True)
class PlanOptions:
    """plan's own options (what every analysis shares is RunOptions). `tolerance`: relative L2 against float64 to
    meet (None: the precision's check tolerance). `load`: re-verify a saved plan instead of searching. `save`: write
    the verified plan there. `exports`: {target: path}, or TARGET=PATH strings, each file verified (exports.py);
    `export_onnx` is `onnx`'s path. `measure_speed`: time the planned model. `backup`: what a quantized format's
    plan makes of its layers: float, or int8 (8-bit weights in an int4-weight model, where the quantizer offers it)."""
    precision: str = "fp16"
    backend: str = "torch"
    tolerance: float | None = None
    device: str = "cpu"
    load: str | None = None
    save: str | None = None
    exports: Mapping[str, str] | Iterable[str] | None = None
    export_onnx: str | None = None
    measure_speed: bool = True
    backup: str = "float"  # a quantized plan's layers: left float, or (int4-weight) quantized at 8 bits


@rundir.scoped
def plan(model: str, options: PlanOptions | None = None, shared: RunOptions | None = None) -> Plan:
    """Find (or load and re-verify) the ops to keep in fp32 so `model` at the precision meets the tolerance on the
    backend; try the backend's autocast when the pure precision fails; optionally save, time it and export it. Trials,
    timings and the autocast remedy all run on the backend. `progress(what, evaluations so far, None)` is called
    after each end-to-end evaluation."""
    from fpdiff.sources import load as load_source
    o, shared = options or PlanOptions(), (shared or RunOptions()).ready()
    precision, backend, load, save, progress = o.precision, o.backend, o.load, o.save, shared.progress
    if str(precision).strip().lower() in prec.QUANTIZED:
        return _quantized_plan(model, o, shared)
    if o.backup != "float":
        raise UsageError(f"--backup {o.backup} is for a quantized format's plan; at {precision} the plan keeps ops "
                         "in fp32")
    p = prec.get(precision)
    if p.cast_dtype not in ("float16", "bfloat16"):
        raise UsageError(f"plan keeps ops of an fp16 or bf16 model in fp32, or layers of a quantized format in float; "
                         f"--precision {precision} is neither")
    reg = shared.registry
    cls = reg.cls(backend)  # unknown names fail before any work
    wanted = exports.requested(o.exports, o.export_onnx)  # a bad target or path is refused before any work
    loaded = Plan.load(load) if load else None
    if loaded is not None and loaded.precision != p.name:
        raise UsageError(f"the plan in {load} is for {loaded.precision}, not {p.name}")
    source = load_source(model, **shared.load_args())
    if source.ref.kind not in cls.kinds:
        can = ", ".join(n for n in reg.names() if source.ref.kind in reg.cls(n).kinds)
        raise UsageError(f"{backend} does not run {source.ref.kind} models, so it cannot run this plan's trials; "
                         f"backends that do: {can}")
    tol = o.tolerance if o.tolerance is not None else source.tolerance.get(p.name, p.tolerance)
    if not (tol > 0 and math.isfinite(tol)):
        raise UsageError(f"--tolerance must be a positive number, got {tol}")
    from fpdiff.runtime.cache import run_folder
    jobs = Jobs(o.device, shared.plugins, shared.flags, shared.timeout, run_folder(shared.cache), reg)
    try:
        if source.ref.kind == ONNX:
            from fpdiff.analysis.plan.onnx_models import plan_onnx as planner
        else:
            from fpdiff.analysis.plan.torch_models import plan_torch as planner
        # a backend that computes the precision wider cannot verify a plan for it: its trials run again where it is
        jobs.verification = jobs.where_computed(reg, backend, source, p)
        result, trials = planner(source, p, jobs=jobs, backend=backend, tolerance=tol, load=loaded,
                                 progress=progress)
        result.verification = _verified(jobs.verification, result)
        if result.passed and o.measure_speed:
            result.speed = speed(trials, result.kept, p)
        if not any(t.passed for t in result.trials if not t.keep):  # the pure precision failed (where computed)
            fp32_ms = _fp32_ms(result, trials) if o.measure_speed else None
            result.autocast = autocast_remedy(jobs, backend, source, trials.expected, p, tol, fp32_ms,
                                              timed=o.measure_speed)
        if wanted and result.passed:
            result.exports = exports.write_all(reg, trials, result.kept, p, wanted)
    finally:
        jobs.close()
    if save and result.passed:
        result.save(save)
    return result


def _quantized_plan(model: str, o: PlanOptions, shared: RunOptions) -> Plan:
    """A quantized format's plan (analysis/plan/quantized.py): the layers its backend's quantizer leaves float."""
    from fpdiff.analysis.plan.quantized import plan_quantized
    if o.device != "cpu":
        raise UsageError(f"quantized cells run on the CPU here; --device {o.device} is not cpu")
    wanted = dict(o.exports) if isinstance(o.exports, Mapping) else exports.parse(o.exports or ())
    if o.export_onnx:
        wanted.setdefault("onnx", o.export_onnx)
    loaded = Plan.load(o.load) if o.load else None
    result = plan_quantized(model, o.precision, o.backend, o.tolerance, shared, o.backup, wanted, loaded)
    if o.save and result.passed:
        result.save(o.save)
    return result


def _verified(v: Verification | None, result: Plan) -> Verification | None:
    """Where the precision was really computed, with the pure precision's and the plan's errors there."""
    if v is None:
        return None
    by_keep = {frozenset(t.keep): t for t in result.trials}
    pure, final = by_keep.get(frozenset()), by_keep.get(frozenset(result.kept))
    v.pure_error = pure.verifier_error if pure is not None else None
    v.error = final.verifier_error if final is not None else None
    return v


def _fp32_ms(result: Plan, trials: ProgramTrials) -> float | None:
    """The backend's time for the program with every op in fp32: from the speed figure, else timed now."""
    if result.speed is None:
        r = trials.run(trials.units, SPEED_RUNS)
        return median_ms(r) if r.status == Status.OK else None
    return result.speed.ms.get(prec.FP32.name)
