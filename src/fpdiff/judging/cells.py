"""Judges each cell of a run: its error against the float64 reference and its precision's baseline (the judge's own
code at that precision), or what failed where; then what the cells say together (shape variants that disagree, a
backend that computed in a narrower format than asked)."""
from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import torch

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding, Metrics
from fpdiff.core.dtypes import DTYPE_CHANGED, dtype_changed
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import CellKey, Grid
from fpdiff.judging.rules import FLOAT64, Evidence
from fpdiff.model.graph import STATIC
from fpdiff.runtime.worker import INTERNAL, JobResult

# the first verdict's rule: the cell's own numbers against the float64 reference and its precision's baseline
FIRST = "float64"


def first_verdicts(ev: Evidence) -> list[Cell]:
    """Every cell of the grid judged on its own numbers against the reference and its precision's baseline, in grid
    order: the verdict the rules then revise."""
    grid, results = ev.grid, ev.results
    casts_cause = _model_casts_cause(ev.ref.notes)
    torch_source = grid.source.ref.kind == "torch"
    cells = []
    for key in grid.cells:
        fp32 = results.get(grid.key(key.backend, key.device, prec.FP32, key.variant))
        cells.append(_judge_cell(ev, key, fp32_ok=fp32 is None or fp32.status == Status.OK,
                                 torch_source=torch_source,
                                 loss_cause=casts_cause if key.precision.is_float64 else None))
    return cells


def survives_precision(ev: Evidence, cells: list[Cell]) -> None:
    """The survives-precision rule on every cell (_survives_precision)."""
    for cell, key in zip(cells, ev.grid.cells):
        _survives_precision(cell, ev.results[key], key.precision, ev.baseline(key.precision), ev.grid)


# A cell this many times more accurate than its precision's baseline did not compute in that precision, whatever the
# backend reports. The baseline is the judge's own code in the format, rounding at least once per kernel; a correct
# implementation of the format rounds at least as often as one that fuses kernels and keeps float32 inside them:
# inductor on the corpus lands 1.0x-2.5x below torch eager's error at fp16 and 1.1x-5.6x at bf16 (Mixtral the most:
# its expert mixing fused in float32), IREE 0.2x-1.1x, ONNX Runtime's fp16 0.45x-1.5x. A backend that computes
# float32 behind a bf16 report lands far below: OpenVINO's bf16 hint on a CPU without bf16 arithmetic, DistilBERT:
# 1.0e-4 against torch's 5.2e-3 (52x); its mixed bf16 on a bf16 CPU, BERT: 23x. Three bits (8x) sits between. A
# fused backend past it did keep much of the model wider than asked: the finding is then true of it, not a bug.
WIDER_FACTOR = 8.0
# Known weak spot: where the model itself does not survive the format, the baseline's error can be the model
# amplifying a rounding rather than the format's own: the onnx wheel's placeholder-weight classifiers have 1000 tied
# logits, which the reference evaluator at bf16 breaks (softmax error 2.9) while IREE's bf16 keeps the tie and errs
# exactly bf16's rounding of 0.001 (5.5e-4); that cell reads `computed-wider` though IREE computed bf16. It is kept
# so: a backend computing float32 on a model the format breaks (rmsnorm's x*x overflowing fp16) must be told, and the
# output floor (the float64 outputs rounded once) cannot tell the two apart when the wider backend was fed inputs
# rounded to the format (it errs 1.04x that floor there, IREE 1.00x).
# Only formats narrower than float32: fp32's baseline error is mostly its inputs' own rounding, and a backend that
# computes fp32 wider changes nothing a deployment decides; fp16 and bf16 are picked for hardware that computes them.
WIDER_BELOW_BITS = 24


def _survives_precision(cell: Cell, r: JobResult, p: prec.Precision, baseline: Metrics | None, grid: Grid) -> None:
    """A cell that computed wider than asked (ORT's CPU runs fp16 nodes in fp32, by its own record; OpenVINO's bf16
    hint on a CPU without bf16 arithmetic, by its numbers alone) says nothing of the precision itself: the model is
    judged at it too, by the baseline (the judge's own code computing in that format), and the cell says whether the
    model survives it, so a model that is not fp16-safe is not waved through by a backend that never computed fp16."""
    if cell.status not in (Status.PASS, Status.PRECISION_LOSS) or not p.is_cast or baseline is None:
        return
    wider = _dominant_bits(r)
    recorded = wider is not None and wider > compare.mantissa_bits(p.compute)
    # the numbers speak where the record does not: a record of wider ops already says so (dtype-changed), and its
    # cell's error still carries what fpdiff rounded on the way in (inputs at the precision)
    measured = None if recorded else _wider_by_numbers(cell, p, baseline)
    if not (recorded or measured):
        return
    if measured:
        cell.findings.append(measured)
        cell.computed_dtype = _dtype_by_numbers(cell, p)
    j = compare.judge(baseline, p, None)
    why = j.reason.removesuffix("; no baseline")
    who = f"{grid.judge_backend} at {p.name}"
    if j.status == Status.PASS:
        cell.reason += f"; computed wider than {p.name}, and the model itself in {p.name} ({who}) passes too"
        return
    cell.reason += (f"; computed wider than {p.name}: the model itself in {p.name} ({who}) does not survive it "
                    f"({why})")
    cell.findings.append(Finding("precision-unsafe", f"{cell.backend} computed wider than {p.name} here, but the model "
                                 f"computed in {p.name} ({who}) gives {j.status}: {why}", remedy=(
                                     f"a target that computes {p.name} (a GPU, an NPU, a CPU with native {p.name}) "
                                     f"will see that error: run fpdiff locate and plan at {p.name} before deploying "
                                     "there")))


def _wider_by_numbers(cell: Cell, p: prec.Precision, baseline: Metrics) -> Finding | None:
    """The computed-wider finding when the cell's error is WIDER_FACTOR or more below its precision's baseline: its
    numbers say it ran wider than asked, whatever it reports (how much wider: the baseline ratio, in bits)."""
    err = (cell.metrics or {}).get("rel_l2")
    if compare.mantissa_bits(p.compute) >= WIDER_BELOW_BITS or not isinstance(err, float) \
            or not 0 < baseline.rel_l2 < math.inf or err * WIDER_FACTOR > baseline.rel_l2:
        return None
    ratio = f"{baseline.rel_l2 / err:.0f}x" if err > 0 else "infinitely"
    bits = "exact results" if cell.effective_bits is None else "float32 arithmetic or wider" \
        if cell.effective_bits >= WIDER_BELOW_BITS else f"~{cell.effective_bits:.0f}-bit arithmetic"
    said = f"; {cell.backend} reports {cell.computed_dtype}" if cell.computed_dtype else ""
    return Finding("computed-wider", f"rel L2 {err:.1e} is {ratio} below {p.name}'s baseline {baseline.rel_l2:.1e} "
                   f"(limit {WIDER_FACTOR:g}x): the numbers say {bits}, not the {compare.mantissa_bits(p.compute)} "
                   f"bits of {p.name}{said}; much of this cell ran wider than {p.name}",
                   remedy=f"this cell does not tell how the model fares where {p.name} is computed; the baseline "
                   f"judges that (the reason says whether the model survives {p.name}); on OpenVINO's CPU plugin "
                   "the processor's instruction set decides what a bf16/f16 hint computes (docs: backends)")


def _dtype_by_numbers(cell: Cell, p: prec.Precision) -> str:
    """What the numbers support as the computed dtype: float32 within 3 bits of its precision, else a mix."""
    want, bits = prec.dtype_name(p.compute), cell.effective_bits
    reported = f"; reported {cell.computed_dtype}" if cell.computed_dtype else ""
    if bits is None or bits >= WIDER_BELOW_BITS - 3:
        return f"float32 (by its numbers{reported})"
    return f"{want}+float32 (by its numbers, ~{bits:.0f} bits{reported})"


def _dominant_bits(r: JobResult) -> int | None:
    """Mantissa bits of the float dtype most of the backend's counted ops computed in (None: it counts none)."""
    counts = {d: n for d, n in (r.op_dtypes or {}).items() if n and hasattr(torch, d)}
    return compare.mantissa_bits(getattr(torch, max(counts, key=counts.get))) if counts else None


def narrower_formats(ev: Evidence, cells: list[Cell]) -> None:
    """Mismatch cells whose backend records computing in a narrower format: judged against that format's baseline,
    asked of the evidence when the grid did not run it (only such a cell needs it)."""
    for cell, key in zip(cells, ev.grid.cells):
        p = key.precision
        fmt = _computed_format(ev.results[key], p) if cell.status == Status.MISMATCH and cell.metrics else None
        if fmt is None:
            continue
        fmt = ev.grid.baseline(fmt).precision  # with the model's own tolerance for that format
        m = ev.metrics(key)
        if m is None:
            continue
        baseline = ev.baseline(fmt)
        if baseline is None and ev.grid.baseline(fmt) in ev.results:
            _unweighable(cell, fmt, ev.results[ev.grid.baseline(fmt)])
        else:
            _judge_as_computed(cell, m, p, fmt, baseline)


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
    return next((q for q in (prec.BF16, prec.FP16) if compare.mantissa_bits(q.compute) == bits), None)


def _unweighable(cell: Cell, fmt: prec.Precision, job: JobResult) -> None:
    """A mismatch whose backend records computing in a narrower format, where that format's baseline did not come
    back (a timeout under load, a failure): the error cannot be weighed against what ran, so no mismatch is claimed
    (a live run without it once called OpenVINO's bf16 run of an fp16 cell a mismatch that the baseline clears)."""
    what = job.message.split(";")[0][:160] if job.message else job.status
    cell.revise("computed-format", Status.UNJUDGED,
                f"{cell.reason}; the backend computed in {fmt.name} (its own record), and the baseline at "
                f"{fmt.name} did not come back ({what}): whether the error is {fmt.name}'s or the backend's "
                "cannot be told; run it again",
                why=f"computed in {fmt.name} by its own record; {fmt.name}'s baseline missing")


def _judge_as_computed(cell: Cell, m: Metrics, p: prec.Precision, fmt: prec.Precision,
                       baseline: Metrics | None) -> None:
    """A mismatch that the backend's own record explains: it computed in `fmt`, narrower than asked. Judged against
    that format's baseline, within the rules it is precision loss of a substituted format (coarser-than-requested,
    which --strict fails), not a wrong computation; beyond them the mismatch stands."""
    if baseline is None:
        return
    j = compare.judge(m, fmt, baseline)
    if j.status == Status.MISMATCH:
        return
    cell.revise("computed-format", Status.PRECISION_LOSS,
                f"{cell.reason}; the backend computed in {fmt.name} (its own record), and against the baseline at "
                f"{fmt.name} ({baseline.rel_l2:.2e}) the error is in line: {p.name} was not what ran",
                why=f"computed in {fmt.name} by its own record; in line with {fmt.name}'s baseline")
    if not any(f.kind == "coarser-than-requested" for f in cell.findings):
        cell.findings.append(Finding("coarser-than-requested", f"asked for {p.name}, computed in {fmt.name}: errors "
                                     f"match {fmt.name}'s baseline, not {p.name}'s", remedy="check the backend's "
                                     "precision hints and what its hardware supports natively"))


def _judge_cell(ev: Evidence, key: CellKey, fp32_ok: bool, torch_source: bool, loss_cause: str | None = None) -> Cell:
    """One cell's verdict: what failed where, or its error against the reference and its precision's baseline."""
    p, r, baseline = key.precision, ev.results[key], ev.baseline(key.precision)
    cell = Cell(key.backend, key.device, p.name, key.variant.name, Status(r.status),
                duration_s=round(r.prepare_s + r.run_s, 3), info=_info(r), output_dtypes=r.output_dtypes,
                findings=list(r.notes), op_dtypes=r.op_dtypes, planned_op_dtypes=r.planned_op_dtypes)
    if r.status != Status.OK:
        _failed(cell, p, r, fp32_ok, torch_source)
        return cell
    if not ev.has_reference:  # the judge failed and nothing stands in for it (judge.unjudged_without_judge says why)
        cell.revise(FIRST, Status.UNJUDGED, "no float64 reference")
        return cell
    shapes = ev.unmeasurable(key)
    if shapes is not None:
        cell.revise(FIRST, Status.MISMATCH, f"output shapes differ: {shapes}")
        return cell
    m = ev.metrics(key)
    floored = _with_export_floor(baseline, r, cell)
    if floored is not baseline:
        loss_cause = "the exported graph's float32 constants account for it (export-departure)"
    _judged(ev, key, cell, m, floored, loss_cause)
    return cell


def _failed(cell: Cell, p: prec.Precision, r: JobResult, fp32_ok: bool, torch_source: bool) -> None:
    """A job that did not run through: its status, the stage and component that failed, and what to try."""
    status = {Status.UNSUPPORTED: Status.UNSUPPORTED, Status.TIMEOUT: Status.TIMEOUT,
              Status.ERROR: Status.ERROR}.get(r.status, Status.CRASH)
    cell.revise("job", status, _failure_reason(r), why=f"the job ended {r.status}")
    cell.stage, cell.component = r.stage, r.component
    if r.status == Status.UNSUPPORTED:
        cell.findings.append(_unsupported_finding(cell.backend, p, r, fp32_ok, torch_source))
    elif r.status in (Status.CRASH, Status.ERROR) and r.log_tail:
        cell.info["log_tail"] = r.log_tail[-1500:]
    if r.traceback:
        cell.info["traceback"] = r.traceback
    cell.findings += _dtype_findings(p, cell, r)  # what it compiled says so even when it could not run


def _judged(ev: Evidence, key: CellKey, cell: Cell, m: Metrics, baseline: Metrics | None,
            loss_cause: str | None) -> None:
    """The verdict on a cell's numbers, with what its dtypes, ranges and repeated runs say beside it."""
    p, r = key.precision, ev.results[key]
    j = compare.judge(m, p, baseline, _narrowest_bits(r), loss_cause)
    cell.revise(FIRST, j.status, j.reason)
    cell.effective_bits = round(j.effective_bits, 1) if j.effective_bits is not None else None
    cell.metrics, cell.baseline_metrics = m.as_dict(), baseline.as_dict() if baseline else None
    cell.findings += j.findings
    cell.computed_dtype = r.computed_dtype or _dtype_of_outputs(r.output_dtypes)
    cell.findings += _dtype_findings(p, cell, r)
    ranges = ev.keep(f"ranges {p.name}", lambda: compare.range_findings(ev.reading(FLOAT64), p))  # kept always
    if j.status != Status.PASS:
        cell.findings += ranges
    differ, runs = ev.keep(f"repeats {key}", lambda: (compare.repeat_difference(r.outputs, r.repeats),
                                                      1 + len(r.repeats)))
    if differ:
        cell.findings.append(Finding("nondeterministic", f"{runs} runs of the same compiled model "
                                     f"differ bitwise: {differ}; the verdict uses the first run",
                                     remedy="look for atomics, unordered parallel reductions or uninitialized "
                                     "memory in the backend; judge with more runs before trusting one"))


def _with_export_floor(baseline: Metrics | None, r: JobResult, cell: Cell) -> Metrics | None:
    """An exported graph that computes its torch program with float32-rounded constants (onnxtools/export.py records
    by how much, in float64) hands the backend that error: the cell is judged with it as the baseline's floor, so the
    backend is not called wrong for a constant it was given, and the exporter's share is said."""
    d = r.export_departure
    if not d or baseline is None or d <= 2 * baseline.rel_l2:  # a floor only where it is the larger error
        return baseline
    cell.findings.append(Finding("export-departure", f"the exported ONNX graph departs from the torch program by rel "
                                 f"L2 {d:.1e} in float64 (constants or attributes held in float32): the cell is judged "
                                 "with that as its baseline's floor", op=None,
                                 remedy="where fp64 matters, keep such constants as float64 tensors in the model"))
    return replace(baseline, rel_l2=d, max_norm=max(baseline.max_norm, d))


def _narrowest_bits(r: JobResult) -> int | None:
    """Mantissa bits of the narrowest float dtype the backend records computing in (its counted compiled ops)."""
    counts = [d for d, n in (r.op_dtypes or {}).items() if n and hasattr(torch, d)]
    return min((compare.mantissa_bits(getattr(torch, d)) for d in counts), default=None)


def _failure_reason(r: JobResult) -> str:
    """The failing component and stage first: the cell's backend is not blamed for an exporter's failure."""
    if r.component == INTERNAL:
        return f"internal error in fpdiff ({r.stage or 'unknown stage'}): {r.message} (traceback in the JSON report)"
    where = " at ".join(x for x in (r.component, r.stage) if x)
    return f"{where} failed: {r.message}" if where and r.status == Status.ERROR else (
        f"{where}: {r.message}" if where else r.message)


def _dtype_of_outputs(dtypes: list[str]) -> str | None:
    """The float dtypes a backend returned, when it records nothing of what it computed."""
    floats = sorted({d for d in dtypes if "float" in d})
    return "+".join(floats) if floats else None


def _dtype_findings(p: prec.Precision, cell: Cell, r: JobResult) -> list[Finding]:
    """The dtype-changed rule (core/dtypes.py) on what the backend records running: its float ops by dtype, and
    for a whole-model cast the dtypes it returned, unless its own record of what it computed says the dtype
    (OpenVINO computes in bf16 behind float32 inputs and outputs)."""
    if any(f.kind == DTYPE_CHANGED for f in cell.findings):  # a plugin's own
        return []
    want = prec.dtype_name(p.autocast or p.dtype)
    returned = r.output_dtypes if p.is_cast and r.computed_dtype != want else []
    found = dtype_changed(cell.backend, want, r.op_dtypes, r.planned_op_dtypes, returned, r.dtype_remedy)
    return [found] if found else []


def _unsupported_finding(b: str, p: prec.Precision, r: JobResult, fp32_ok: bool, torch_source: bool) -> Finding:
    """Name op, dtype and backend; suggest autocast only when the refusal is about the dtype (fp32 ran)."""
    what = f"op {r.op}" if r.op else "the model"
    msg = f"{b} cannot run {what} in {p.name}"
    remedy = None
    if not fp32_ok or not r.op:
        pass  # not an op's refusal of the dtype: the backend cannot run this model, or has no such precision at all
    elif p.is_cast and p.dtype in (torch.float16, torch.bfloat16):
        amp = "amp-fp16" if p.dtype == torch.float16 else "amp-bf16"
        keep = f"keep {r.op or 'the refused op'} in fp32"
        remedy = (f"run under autocast ({amp}: weights stay fp32, torch picks fp32 for ops that need it), or {keep}"
                  if torch_source else f"{keep} (an ONNX graph has no autocast)")
    elif p.is_float64:
        remedy = "fp64 is rarely supported by compilers; use fp32 on this backend and fp64 only as the judge"
    return Finding(Status.UNSUPPORTED, msg, op=r.op, remedy=remedy)


def shape_variants(ev: Evidence, cells: list[Cell]) -> None:
    """Shape variants of one backend must agree; when one departs, say which and against which."""
    groups: dict[tuple, list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.backend, c.device, c.precision), []).append(c)
    for group in groups.values():
        if len(group) < 2:
            continue
        good = [c for c in group if c.status in (Status.PASS, Status.PRECISION_LOSS)]
        bad = [c for c in group if c.status not in (Status.PASS, Status.PRECISION_LOSS, Status.UNSUPPORTED)]
        if good and bad:
            for c in bad:
                c.findings.append(Finding("variant-disagreement",
                                          f"shape variant {c.shape_variant} is {c.status} while "
                                          f"{', '.join(g.shape_variant for g in good)} of the same backend are not",
                                          remedy=_variant_remedy(c, good)))


def _variant_remedy(c: Cell, good: list[Cell]) -> str:
    """What to try when one shape variant fails where others pass: a failed compile or load of the static graph
    (every dim pinned) beside a dynamic one that runs is the model's graph refusing those shapes (an If whose
    branches are each typed for one input size) as often as the backend's; a wrong number is a dynamic-shape bug."""
    if c.shape_variant == STATIC.name and c.status in (Status.ERROR, Status.UNSUPPORTED):
        return ("the graph with every dim pinned to these inputs is refused where the graph as written runs: read the "
                "message for the node (control flow typed for other shapes is the model's own), or deploy with "
                "dynamic dims")
    return f"a dynamic-shape bug in the backend: try fpdiff locate with --shape-variant {c.shape_variant}"


def _info(r: JobResult) -> dict:
    """What the report shows of a job besides its verdict: the backend's info and its runtime's support record."""
    return {**r.info, "support": r.support.as_dict()} if r.support is not None else r.info

