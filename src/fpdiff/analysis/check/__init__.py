"""The grid: every (backend, device, precision, shape variant) cell judged against float64 and its baseline."""
from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from fpdiff.analysis.check import conditioning
from fpdiff.analysis.check import judge as judge_mod
from fpdiff.backends import JUDGE, registry
from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding, Metrics
from fpdiff.core.errors import UsageError
from fpdiff.core.paths import cache_root
from fpdiff.core.status import FAILING, NOT_JUDGED, NOTHING_JUDGED, fails
from fpdiff.core.versions import report_versions as versions
from fpdiff.model import graph
from fpdiff.model.graph import STATIC, ShapeVariant
from fpdiff.runtime import rundir
from fpdiff.runtime.external import Router
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import (
    CRASH,
    DEFAULT_TIMEOUT,
    ERROR,
    INTERNAL,
    OK,
    TIMEOUT,
    UNSUPPORTED,
    JobResult,
)
from fpdiff.sources import Source, load

DEFAULT_BACKENDS = ("torch", "inductor", "ort", "iree")
# Each cell runs its prepared model twice and flags `nondeterministic` when the outputs differ bitwise: a second
# run costs no compile, and a backend that answers differently each time makes every verdict a sample of one.
DEFAULT_REPEAT = 2



@dataclass
class Cell:
    backend: str
    device: str
    precision: str
    shape_variant: str
    status: str
    reason: str = ""
    metrics: dict | None = None
    baseline_metrics: dict | None = None
    computed_dtype: str | None = None
    output_dtypes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    duration_s: float = 0.0
    info: dict = field(default_factory=dict)
    effective_bits: float | None = None  # mantissa bits the cell's error corresponds to (compare.effective_bits)
    stage: str | None = None  # failed cells: the stage that failed (torch.export, onnx export, compile, run, ...)
    component: str | None = None  # failed cells: who failed there, or "internal error in fpdiff"

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["findings"] = [f.as_dict() for f in self.findings]
        return d


@dataclass
class CheckResult:
    model: str
    cells: list[Cell]
    reference: dict
    versions: dict
    duration_s: float = 0.0
    judge: dict = field(default_factory=dict)  # the judge's cross-check (see check/judge.py)
    source: dict = field(default_factory=dict)  # how the model was brought in: opset conversion, inputs
    fingerprint: str = ""  # the model's content hash (spec and weights, or the ONNX file and inputs)

    def exit_code(self, strict: bool = False) -> int:
        """0: every judged cell holds; 1: a cell fails (an error or crash too: something broke, which a script
        testing for 1 must see); NOTHING_JUDGED: no cell failed and none reached a verdict (all refused or unjudged)."""
        if any(fails(c.status, [f.kind for f in c.findings], strict) and c.status in FAILING for c in self.cells):
            return 1
        if not self.judged():
            return NOTHING_JUDGED
        return int(any(fails(c.status, [f.kind for f in c.findings], strict) for c in self.cells))

    def judged(self) -> int:
        """Cells that reached a verdict on the numbers (pass, precision-loss, mismatch, ...)."""
        return sum(c.status not in NOT_JUDGED for c in self.cells)

    def nothing_judged(self) -> str | None:
        """One line saying that no cell could be judged, and what the cells were instead; None when some were."""
        if self.judged():
            return None
        counts: dict[str, int] = {}
        for c in self.cells:
            counts[str(c.status)] = counts.get(str(c.status), 0) + 1
        what = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no cells"
        return (f"nothing was judged: no cell of {len(self.cells)} reached a verdict ({what}); "
                f"exit {self.exit_code()}")

    def as_dict(self) -> dict:
        return {"fpdiff_version": self.versions.get("fpdiff"), "model": self.model, "model_hash": self.fingerprint,
                "reference": self.reference,
                "judge": self.judge, "source": self.source, "versions": self.versions,
                "duration_s": round(self.duration_s, 3),
                "cells": [c.as_dict() for c in self.cells],
                "summary": {s: sum(c.status == s for c in self.cells) for s in compare.STATUSES}}


def _check_inputs(source: Source, allow_nonfinite: bool) -> None:
    for name, t in zip(source.input_names, source.inputs):
        a = t.numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if a.dtype.kind == "f" and not np.isfinite(a).all():
            n = int(np.count_nonzero(~np.isfinite(a)))
            if not allow_nonfinite:
                raise UsageError(f"input {name!r} has {n} non-finite values (NaN/Inf); metrics would be meaningless "
                                 "- fix the inputs, or pass --allow-nonfinite to run anyway")


def _save_data(source: Source, run_dir: Path) -> str:
    path = run_dir / "source.pt"
    data = {"fingerprint": source.fingerprint, "inputs": source.inputs, "input_names": source.input_names}
    if source.ref.kind == "torch":
        data["state"] = source.module.state_dict()
    torch.save(data, path)
    return str(path)


@rundir.scoped
def check(model: str, *, backends: Sequence[str] = DEFAULT_BACKENDS,
          precisions: Sequence[str] = prec.DEFAULT_PRECISIONS, devices: Sequence[str] = ("cpu",),
          plugins: Sequence[str] = (), iree_flags: Sequence[str] = (), shape_variants: Sequence[str] | None = None,
          inputs: str | None = None, shapes: dict[str, list[int]] | None = None, seed: int = 0,
          allow_nonfinite: bool = False, timeout: float = DEFAULT_TIMEOUT, cache_dir: str | None | bool = None,
          repeat: int = DEFAULT_REPEAT, keep_opset: bool = False, repro_dir: str | None = "fpdiff-out",
          progress: Callable[[str, int, int], None] | None = None) -> CheckResult:
    """Run the grid and judge every cell. `cache_dir=False` turns the compile cache off. `repro_dir`: where the op
    an overruled judge gets wrong is written (None: not written)."""
    t_start = time.perf_counter()
    reg = registry(plugins)
    for b in backends:
        reg.create(b)  # unknown names fail here, before any work
    ps = [prec.get(p) for p in precisions]
    if not ps:
        raise UsageError("no precision given")
    for d in devices:
        if d != "cpu" and not d.startswith("cuda"):
            raise UsageError(f"unknown device {d!r}; use cpu or cuda")
    source = load(model, inputs=inputs, shapes=shapes, seed=seed, keep_opset=keep_opset)
    _check_inputs(source, allow_nonfinite)
    variants = graph.variants(source.dynamic_shapes)
    if shape_variants:
        variants = [graph.find_variant(source.dynamic_shapes, v) for v in shape_variants]
    tol_over = source.tolerance
    for name in tol_over:
        prec.get(name)
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    judge_backend = JUDGE[source.ref.kind]
    cache = None if cache_dir is False else str(cache_dir or cache_root())
    run_dir = rundir.mkdtemp(prefix="fpdiff-check-")
    data_path = _save_data(source, run_dir)

    cells = [(b, d, p, v) for b in backends for d in devices for p in ps
             for v in (variants if reg.cls(b).shape_variants else [STATIC])]
    cell_keys = {(b, d, p.name, v) for b, d, p, v in cells}

    def job(backend: str, p: str, device: str, variant: ShapeVariant) -> Job:
        flags = tuple(iree_flags) if reg.cls(backend).takes_flags else ()
        n = repeat if (backend, device, p, variant) in cell_keys else 1
        return Job(source.ref, data_path, backend, p, device, variant, tuple(plugins), flags, cache, seed, n)

    baselines = {p.name: (judge_backend, "cuda" if p.cuda_only else "cpu", p, STATIC) for p in ps}
    fp32 = prec.get("fp32")
    checks = judge_mod.cross_check_jobs(source.ref.kind, judge_backend, fp32, STATIC)
    # a judge run apart from the backend's fp64 cell when the backend declares one (backends/base.py judge_flags)
    judge_flags = reg.cls(judge_backend).judge_flags
    order = [(judge_backend, "cpu", prec.get("fp64"), STATIC)] * (not judge_flags) + list(baselines.values()) \
        + checks + cells
    order = list(dict.fromkeys((b, d, p.name, v) for b, d, p, v in order))
    results: dict[tuple, JobResult] = {}
    env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1))}
    with Router(env) as pool:
        if judge_flags:
            ref = pool.run(replace(job(judge_backend, "fp64", "cpu", STATIC), flags=judge_flags, repeat=1), timeout)
            if ref.status != OK:
                raise UsageError(f"the float64 reference ({judge_backend} on cpu) failed: {ref.message}")
        for i, (b, d, p, v) in enumerate(order):
            if progress:
                progress(f"{b} {d} {p} {v.name}", i, len(order))
            results[(b, d, p, v)] = pool.run(job(b, p, d, v), timeout)
            if i == 0 and not judge_flags:
                ref = results[(b, d, p, v)]
                if ref.status != OK:
                    raise UsageError(f"the float64 reference ({b} on cpu) failed: {ref.message}")
        if progress:
            progress("done", len(order), len(order))
    ref_out = ref.outputs

    base_metrics: dict[str, Metrics | None] = {}
    for name, (b, d, p, v) in baselines.items():
        r = results[(b, d, name, v)]
        base_metrics[name] = _measure(ref_out, r, p) if r.status == OK else None

    verdict_of_judge = judge_mod.cross_check(source, results, ref_out, judge_backend, fp32, STATIC)
    if verdict_of_judge.status == judge_mod.SUSPECT:
        _consult_witnesses(verdict_of_judge, source, reg, results, ref_out, judge_backend, env,
                           lambda key: job(key[0], key[2], key[1], key[3]), timeout, repro_dir)
    out_cells = []
    casts_cause = _model_casts_cause(ref.notes)
    for b, d, p, v in cells:
        r = results[(b, d, p.name, v)]
        if tol_over.get(p.name):
            p = prec.Precision(**{**p.__dict__, "tolerance": float(tol_over[p.name])})
        fp32 = results.get((b, d, "fp32", v))
        out_cells.append(_judge_cell(b, d, p, v, r, ref_out, base_metrics.get(p.name),
                                     fp32_ok=fp32 is None or fp32.status == OK,
                                     torch_source=source.ref.kind == "torch",
                                     loss_cause=casts_cause if p.name == "fp64" else None))
    _variant_findings(out_cells, {(b, d, p.name, v.name): results[(b, d, p.name, v)] for b, d, p, v in cells})
    narrower = [(cell, key, fmt) for cell, key in zip(out_cells, cells) if cell.status == compare.MISMATCH
                and cell.metrics and (fmt := _computed_format(results[(key[0], key[1], key[2].name, key[3])], key[2]))]
    if narrower:
        with Router(env) as pool:
            for cell, (b, d, p, v), fmt in narrower:
                if fmt.name not in base_metrics:  # that format's baseline, run now: only a suspect cell needs it
                    jb, jd, _, jv = baselines.get(fmt.name) or (judge_backend, "cpu", fmt, STATIC)
                    r = pool.run(job(jb, fmt.name, jd, jv), timeout)
                    base_metrics[fmt.name] = _measure(ref_out, r, fmt) if r.status == OK else None
                _judge_as_computed(cell, _measure(ref_out, results[(b, d, p.name, v)], p), p, fmt,
                                   base_metrics[fmt.name])
    stand_in = results.get(verdict_of_judge.stand_in) if verdict_of_judge.stand_in else None

    def rejudge(key: tuple) -> compare.Judgement | None:
        """The cell measured against the independent implementation instead of the judge."""
        b, d, name, v = key
        p = prec.get(name)
        base = results.get(baselines[name][:2] + (name, STATIC))
        try:
            m = _measure(stand_in.outputs, results[key], p)
            bm = _measure(stand_in.outputs, base, p) if base is not None and base.status == OK else None
        except _ShapeMismatch:
            return None
        return compare.judge(m, p, bm)

    keys = [(b, d, p.name, v) for b, d, p, v in cells]
    judge_mod.hold_unconfirmed(verdict_of_judge, out_cells, keys, rejudge)
    judge_mod.judge_by_majority(verdict_of_judge, out_cells, keys,
                                lambda key: _by_majority(verdict_of_judge, results, baselines, key))
    # a mismatch no larger than the float64 reference's own movement under rounding-sized perturbations is the model's
    conditioning.reconsider(source, out_cells, [results[(b, d, p.name, v)] for b, d, p, v in cells], ref_out,
                            judge_backend, data_path, timeout=timeout, env=env, seed=seed)
    reference = {"backend": judge_backend, "device": "cpu", "dtype": "float64",
                 "outputs": [list(a.shape) for a in ref_out], "duration_s": round(ref.prepare_s + ref.run_s, 3),
                 "findings": [f.as_dict() for f in ref.notes]}  # the model's own casts, fpdiff's decompositions
    return CheckResult(source.ref.label, out_cells, reference, versions(), time.perf_counter() - t_start,
                       judge=verdict_of_judge.as_dict(), source=dict(source.notes), fingerprint=source.fingerprint)


def _model_casts_cause(judge_notes: list[Finding]) -> str | None:
    """A model that casts to a narrower float itself cannot compute in fp64 as written (its fp64 baseline carries those
    casts): what an fp64 cell's precision loss is due to, not fp64 being too coarse; None when it casts nothing."""
    casts = [f for f in judge_notes if f.kind == "model-cast"]
    if not casts:
        return None
    spots = [m.group(1) for f in casts if (m := re.search(r" at (\S+:\d+)", f.message))]
    where = ", ".join("/".join(Path(x).parts[-2:]) for x in spots[:3]) + (", ..." if len(spots) > 3 else "")
    return (f"the model's own casts compute in a narrower float (model-cast on the reference: {where}), so as "
            "written it cannot reach fp64's tolerance")


def _computed_format(r: JobResult, p: prec.Precision) -> prec.Precision | None:
    """The narrower format a backend records computing in instead of the requested one (OpenVINO's f16 hint run as
    bf16): a precision fpdiff has a baseline for, or None."""
    bits = _narrowest_bits(r)
    if bits is None or not p.is_cast or bits >= compare.mantissa_bits(p.compute):
        return None
    return next((q for q in (prec.get("bf16"), prec.get("fp16")) if compare.mantissa_bits(q.compute) == bits), None)


def _judge_as_computed(cell: Cell, m: Metrics, p: prec.Precision, fmt: prec.Precision,
                       baseline: Metrics | None) -> None:
    """A mismatch that the backend's own record explains: it computed in `fmt`, narrower than asked. Judged against
    that format's baseline, within the rules it is precision loss of a substituted format (coarser-than-requested,
    which --strict fails), not a wrong computation; beyond them the mismatch stands."""
    if baseline is None:
        return
    j = compare.judge(m, fmt, baseline)
    if j.status == compare.MISMATCH:
        return
    cell.status = compare.PRECISION_LOSS
    cell.reason = (f"{cell.reason}; the backend computed in {fmt.name} (its own record), and against the baseline "
                   f"at {fmt.name} ({baseline.rel_l2:.2e}) the error is in line: {p.name} was not what ran")
    if not any(f.kind == "coarser-than-requested" for f in cell.findings):
        cell.findings.append(Finding("coarser-than-requested", f"asked for {p.name}, computed in {fmt.name}: errors "
                                     f"match {fmt.name}'s baseline, not {p.name}'s", remedy="check the backend's "
                                     "precision hints and what its hardware supports natively"))


def _measure(ref_out, r: JobResult, p: prec.Precision) -> Metrics:
    if len(r.outputs) != len(ref_out) or any(a.shape != b.shape for a, b in zip(r.outputs, ref_out)):
        raise _ShapeMismatch(f"outputs {[list(a.shape) for a in r.outputs]} vs float64 "
                             f"{[list(a.shape) for a in ref_out]}")
    return compare.measure(ref_out, r.outputs, p.compute)


class _ShapeMismatch(Exception):
    pass


def _judge_cell(b: str, d: str, p: prec.Precision, v: ShapeVariant, r: JobResult, ref_out,
                baseline: Metrics | None, fp32_ok: bool, torch_source: bool, loss_cause: str | None = None) -> Cell:
    cell = Cell(b, d, p.name, v.name, r.status, duration_s=round(r.prepare_s + r.run_s, 3), info=r.info,
                output_dtypes=r.output_dtypes, findings=list(r.notes))
    if r.status != OK:
        cell.status = {UNSUPPORTED: compare.UNSUPPORTED, TIMEOUT: compare.TIMEOUT,
                       ERROR: compare.ERROR}.get(r.status, compare.CRASH)
        cell.stage, cell.component = r.stage, r.component
        cell.reason = _failure_reason(r)
        if r.status == UNSUPPORTED:
            cell.findings.append(_unsupported_finding(b, p, r, fp32_ok, torch_source))
        elif r.status in (CRASH, ERROR) and r.log_tail:
            cell.info["log_tail"] = r.log_tail[-1500:]
        if r.traceback:
            cell.info["traceback"] = r.traceback
        return cell
    try:
        m = _measure(ref_out, r, p)
    except _ShapeMismatch as e:
        cell.status, cell.reason = compare.MISMATCH, f"output shapes differ: {e}"
        return cell
    floored = _with_export_floor(baseline, r, cell)
    if floored is not baseline:
        loss_cause = "the exported graph's float32 constants account for it (export-departure)"
    baseline = floored
    j = compare.judge(m, p, baseline, _narrowest_bits(r), loss_cause)
    cell.status, cell.reason = j.status, j.reason
    cell.effective_bits = round(j.effective_bits, 1) if j.effective_bits is not None else None
    cell.metrics, cell.baseline_metrics = m.as_dict(), baseline.as_dict() if baseline else None
    cell.findings += j.findings
    cell.computed_dtype = r.computed_dtype or _dtype_of_outputs(r.output_dtypes)
    cell.findings += _dtype_findings(p, cell, r)
    if j.status != compare.PASS:
        cell.findings += compare.range_findings(ref_out, p)
    differ = compare.repeat_difference(r.outputs, r.repeats)
    if differ:
        cell.findings.append(Finding("nondeterministic", f"{1 + len(r.repeats)} runs of the same compiled model "
                                     f"differ bitwise: {differ}; the verdict uses the first run",
                                     remedy="look for atomics, unordered parallel reductions or uninitialized "
                                     "memory in the backend; judge with more runs before trusting one"))
    return cell


def _with_export_floor(baseline: Metrics | None, r: JobResult, cell: Cell) -> Metrics | None:
    """An exported graph that computes its torch program with float32-rounded constants (onnxtools/export.py records
    by how much, in float64) hands the backend that error: the cell is judged with it as the baseline's floor, so the
    backend is not called wrong for a constant it was given, and the exporter's share is said."""
    d = r.info.get("onnx_export_departure")
    if not d or baseline is None or d <= 2 * baseline.rel_l2:  # a floor only where it is the larger error
        return baseline
    cell.findings.append(Finding("export-departure", f"the exported ONNX graph departs from the torch program by rel "
                                 f"L2 {d:.1e} in float64 (constants or attributes held in float32): the cell is judged "
                                 "with that as its baseline's floor", op=None,
                                 remedy="where fp64 matters, keep such constants as float64 tensors in the model"))
    return replace(baseline, rel_l2=d, max_norm=max(baseline.max_norm, d))


def _narrowest_bits(r: JobResult) -> int | None:
    """Mantissa bits of the narrowest float dtype the backend records computing in (its counted compiled ops)."""
    counts = [d for d, n in (r.info.get("op_dtypes") or {}).items() if n and hasattr(torch, d)]
    return min((compare.mantissa_bits(getattr(torch, d)) for d in counts), default=None)


def _failure_reason(r: JobResult) -> str:
    """The failing component and stage first: the cell's backend is not blamed for an exporter's failure."""
    if r.component == INTERNAL:
        return f"internal error in fpdiff ({r.stage or 'unknown stage'}): {r.message} (traceback in the JSON report)"
    where = " at ".join(x for x in (r.component, r.stage) if x)
    return f"{where} failed: {r.message}" if where and r.status == ERROR else (
        f"{where}: {r.message}" if where else r.message)


def _dtype_of_outputs(dtypes: list[str]) -> str | None:
    floats = sorted({d for d in dtypes if "float" in d})
    return "+".join(floats) if floats else None


def _dtype_findings(p: prec.Precision, cell: Cell, r: JobResult) -> list[Finding]:
    """A whole-model cast must come back in its dtype; a backend that returns something else changed it, unless its
    own record of what it computed says the dtype (OpenVINO computes in bf16 behind float32 inputs and outputs)."""
    want = prec.dtype_name(p.dtype)
    if not p.is_cast or any(f.kind == "dtype-changed" for f in cell.findings) or r.computed_dtype == want:
        return []
    got = sorted({d for d in r.output_dtypes if "float" in d and d != want})
    if got:
        return [Finding("dtype-changed", f"asked for {want}, the backend returned {', '.join(got)}",
                        remedy="check the backend's precision flags; this cell is not a real " + p.name + " run")]
    return []


def _unsupported_finding(b: str, p: prec.Precision, r: JobResult, fp32_ok: bool, torch_source: bool) -> Finding:
    """Name op, dtype and backend; suggest autocast only when the refusal is about the dtype (fp32 ran)."""
    what = f"op {r.op}" if r.op else "the model"
    msg = f"{b} cannot run {what} in {p.name}"
    remedy = None
    if not fp32_ok:
        pass  # not a dtype refusal: the backend cannot run this model at all
    elif p.is_cast and p.dtype in (torch.float16, torch.bfloat16):
        amp = "amp-fp16" if p.dtype == torch.float16 else "amp-bf16"
        keep = f"keep {r.op or 'the refused op'} in fp32"
        remedy = (f"run under autocast ({amp}: weights stay fp32, torch picks fp32 for ops that need it), or {keep}"
                  if torch_source else f"{keep} (an ONNX graph has no autocast)")
    elif p.name == "fp64":
        remedy = "fp64 is rarely supported by compilers; use fp32 on this backend and fp64 only as the judge"
    return Finding("unsupported", msg, op=r.op, remedy=remedy)


def _variant_findings(cells: list[Cell], results: dict) -> None:
    """Shape variants of one backend must agree; when one departs, say which and against which."""
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.backend, c.device, c.precision), []).append(c)
    for group in groups.values():
        if len(group) < 2:
            continue
        good = [c for c in group if c.status in (compare.PASS, compare.PRECISION_LOSS)]
        bad = [c for c in group if c.status not in (compare.PASS, compare.PRECISION_LOSS, compare.UNSUPPORTED)]
        if good and bad:
            for c in bad:
                c.findings.append(Finding("variant-disagreement",
                                          f"shape variant {c.shape_variant} is {c.status} while "
                                          f"{', '.join(g.shape_variant for g in good)} of the same backend are not",
                                          remedy="a dynamic-shape bug in the backend: try fpdiff locate with "
                                          f"--shape-variant {c.shape_variant}"))


def _consult_witnesses(check: judge_mod.JudgeCheck, source: Source, reg, results: dict, ref_out, judge_backend: str,
                       env: dict, job: Callable[[tuple], Job], timeout: float,
                       repro_dir: str | None) -> None:
    """A suspect judge asks every independent implementation (declared `independent`) at fp32: those in the grid,
    and the others available here when the graph is small enough for one more compile (judge.WITNESS_MAX_NODES)."""
    independent = [b for b in reg.names() if reg.cls(b).independent and source.ref.kind in reg.cls(b).kinds
                   and b != judge_backend]
    keys = [check.stand_in] + [(b, "cpu", "fp32", STATIC) for b in independent]
    keys = [k for k in dict.fromkeys(keys) if k is not None]
    missing = [k for k in keys if k not in results]
    nodes = len(source.module.graph.node) if source.ref.kind == "onnx" else 0
    runnable = [k for k in missing if reg.cls(k[0]).route is None
                and reg.create(k[0]).available() is None and nodes <= judge_mod.WITNESS_MAX_NODES]
    if runnable:
        with Router(env) as pool:
            for k in runnable:
                results[k] = pool.run(job(k), timeout)
    asked = [k for k in keys if k in results]
    judge_mod.ask_witnesses(check, results, ref_out, (judge_backend, "cpu", "fp32", STATIC), asked,
                            prec.get("fp32"), [k[0] for k in keys if k not in results])
    if check.status == judge_mod.OVERRULED and repro_dir and check.first_divergence:
        try:
            judge_mod.write_repro(source, check, repro_dir)
        except Exception as e:  # the verdicts stand without the repro; the report says why it is missing
            check.message += f"; the repro could not be written ({type(e).__name__}: {str(e)[:200]})"


def _by_majority(check: judge_mod.JudgeCheck, results: dict, baselines: dict, key: tuple) -> compare.Judgement | None:
    """A cell against the majority's fp32 reading. Its baseline: at fp32 the witnesses' own spread around the
    reading; at other precisions the judge code's run there, only where it agrees with the reading within the
    precision's tolerance (the overruled judge's code usually carries its error into every dtype), else none.
    Precisions finer than fp32 cannot be judged against an fp32 reading (None)."""
    p, fp32 = prec.get(key[2]), prec.get("fp32")
    if p.unit_roundoff < fp32.unit_roundoff:
        return None
    try:
        m = _measure(check.reading, results[key], p)
    except _ShapeMismatch:
        return None
    if p.unit_roundoff == fp32.unit_roundoff:
        return compare.judge(m, p, check.spread)
    b, d, _, v = baselines[p.name]
    base = results.get((b, d, p.name, v))
    try:
        bm = _measure(check.reading, base, p) if base is not None and base.status == OK else None
    except _ShapeMismatch:
        bm = None
    return compare.judge(m, p, bm if bm is not None and compare.judge(bm, p, None).status == compare.PASS else None)
