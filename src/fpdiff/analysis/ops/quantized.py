"""A quantized op case judged as quant judges a user's quantized file: each backend that runs quantized ONNX graphs
runs the case's graph as it is, and the cell is judged by judging/quantized.py against the graph's exact float64
emulation (the backend's quantized values read back, each kernel in steps), and against the float twin's float64
where the case has one (what the format costs). The cell's precision is the graph's format (int8, int8-dynamic,
int4-weight, fp8): the float precisions change nothing in a graph whose numbers are its quantized types."""
from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from fpdiff.analysis.ops.case import Case, OnnxSample, OpsCell
from fpdiff.analysis.ops.quantized_cases import BY_BACKEND
from fpdiff.analysis.ops.sweep import CaseOutcome, SweepConfig, safe_name
from fpdiff.analysis.options import RunOptions
from fpdiff.analysis.quant import QuantOptions, QuantSession
from fpdiff.core import precision as prec
from fpdiff.core.errors import QUANTIZE, ReferenceFailed, UsageError
from fpdiff.core.status import Status
from fpdiff.core.task import ONNX, TORCH
from fpdiff.judging.grid import make_grid

# a case whose graph holds no quantized tensor (a quantizer left every op float): nothing quantized to judge
NOTHING_QUANTIZED = "the quantizer left every op of this graph float: nothing quantized to judge"
# statuses that get a standalone repro (the sweep's own rule): the backend computed something wrong, or failed
REPRO_STATUSES = (Status.MISMATCH, Status.ERROR, Status.CRASH)


# the format a backend's own quantizer makes of a one-op case: static int8, what every quantizer here makes
FORMAT = "int8"


def is_quantized(case: Case) -> bool:
    """Whether the case is judged against its emulation (a quantized graph, or a case each backend quantizes)."""
    return (isinstance(case.payload, OnnxSample) and case.payload.quantized) or case.variant == BY_BACKEND


def quantizes(reg, backend: str, kind: str) -> bool:
    """A backend that quantizes a model of this kind with its own quantizer."""
    cls = reg.cls(backend)
    return kind in cls.kinds and cls.implements("prepare_quantized")


def run_case(case: Case, config: SweepConfig, reg, work: Path) -> tuple[CaseOutcome, list]:
    """The case on every backend of the sweep that runs quantized ONNX graphs (one that takes ONNX and quantizes),
    each cell judged against the graph's emulation, its failing cells' repros written (the returned requests, the
    float sweep's way of asking for them, stay empty)."""
    import onnx

    from fpdiff.onnxtools.emulate import file_format
    t0 = time.perf_counter()
    outcome = CaseOutcome(case.case_id)
    if case.variant == BY_BACKEND:
        return _by_backend(case, config, reg, work, outcome, t0)
    backends = [b for b in config.backends if quantizes(reg, b, ONNX)]
    if not backends:
        outcome.skipped = f"no backend of {', '.join(config.backends)} runs quantized ONNX graphs"
        return outcome, []
    s: OnnxSample = case.payload
    made_as = file_format(s.model)
    if made_as is None:
        outcome.skipped = NOTHING_QUANTIZED
        return outcome, []
    folder = work / safe_name(case.case_id)
    folder.mkdir(parents=True, exist_ok=True)
    graph, inputs = folder / "quantized.onnx", folder / "inputs.npz"
    onnx.save(s.model, str(graph))
    np.savez(inputs, **s.inputs)
    source = graph
    if s.float_model is not None:
        source = folder / "float.onnx"
        onnx.save(s.float_model, str(source))
    p = prec.quantized(made_as)
    try:
        grid = make_grid(str(source), reg, config.grid(backends, (prec.FP64.name,), str(inputs)))
        shared = RunOptions(timeout=config.timeout, seed=config.seed).ready()
        own = None if s.float_model is not None else p.name
        cells, observed = [], {}
        with QuantSession(grid, QuantOptions(backends=tuple(backends)), shared, own) as session:
            for b in backends:
                cells.append(session.cell(b, p, artifact=str(graph)))
                observed[b] = list(session.last.outputs) if session.last.status == Status.OK else None
    except (UsageError, ReferenceFailed) as e:
        outcome.skipped = str(e)
        outcome.duration_s = time.perf_counter() - t0
        return outcome, []
    outcome.cells = [OpsCell.judged(case, c, info={**_kept(c.info), "expected_from": EXPECTED_FROM})
                     for c in cells]
    moves: dict | None = None
    for c in outcome.cells:
        if c.status == Status.MISMATCH:
            moves = _moves(s) if moves is None else moves
            _conditioned(c, moves)
        if c.stage == QUANTIZE and s.quantized_by:  # the graph the quantizer made is wrong: the quantizer's error
            c.component = s.quantized_by
        c.support, c.support_detail = support_of(c)
        if c.status in REPRO_STATUSES and config.repro_dir:
            c.repro = write_repro(c, s, reg, Path(config.repro_dir), observed.get(c.backend))
    outcome.duration_s = time.perf_counter() - t0
    return outcome, []


def _by_backend(case: Case, config: SweepConfig, reg, work: Path, outcome: CaseOutcome,
                t0: float) -> tuple[CaseOutcome, list]:
    """The float one-op case quantized by each backend's own quantizer at static int8, calibrated on inputs drawn
    like the case's (quant's calibration), and judged by quant's three readings: the case's float64, the quantized
    graph's exact emulation, the backend. A failing cell's repro is quant's to make again (`fpdiff quant`)."""
    from fpdiff.analysis.ops.catalog import write_case
    model, inputs = write_case(case, work / safe_name(case.case_id))
    kind = TORCH if model.endswith(".py") else ONNX
    backends = [b for b in config.backends if quantizes(reg, b, kind)]
    if not backends:
        outcome.skipped = f"no backend of {', '.join(config.backends)} quantizes {kind} models"
        return outcome, []
    try:
        grid = make_grid(model, reg, config.grid(backends, (prec.FP64.name,), inputs))
        shared = RunOptions(timeout=config.timeout, seed=config.seed).ready()
        with QuantSession(grid, QuantOptions(backends=tuple(backends)), shared) as session:
            cells = [session.cell(b, prec.quantized(FORMAT)) for b in backends]
    except (UsageError, ReferenceFailed) as e:
        outcome.skipped = str(e)
        outcome.duration_s = time.perf_counter() - t0
        return outcome, []
    outcome.cells = [OpsCell.judged(case, c, info=_kept(c.info)) for c in cells]
    for c in outcome.cells:
        c.support, c.support_detail = support_of(c)
    outcome.duration_s = time.perf_counter() - t0
    return outcome, []


# Perturbations of the float inputs by one float32 rounding each (relative 2^-24, signs drawn), and how far the
# emulation's quantized values move under them: a graph whose quantized values move under one rounding of its inputs
# as far as the backend departs (a sin of a huge reciprocal between two quantizers) says nothing of the backend, as
# check's conditioning rule says of float graphs
PERTURBATIONS = 3
MOVES_AS_FAR = 0.5  # moved steps at least this share of the departure's: the departure is within the graph's noise


def _moves(s: OnnxSample) -> dict[str, float]:
    """Per quantized tensor (a QuantizeLinear's input, as Local names it) and per output ("" for the outputs, in
    their steps or relative L2), the largest move of the emulation under PERTURBATIONS one-rounding perturbations."""
    from fpdiff.judging.quantized import rel_l2
    from fpdiff.onnxtools.emulate import emulated_values, grid_position, quantized_outputs
    rng = np.random.default_rng(0)
    kinds = quantized_outputs(s.model)
    quantizers = {n.output[0]: n.input[0] for n in s.model.graph.node if n.op_type == "QuantizeLinear"}
    outputs = [o.name for o in s.model.graph.output]
    base = emulated_values(s.model, s.inputs)
    moved: dict[str, float] = {}
    for _ in range(PERTURBATIONS):
        feeds = {k: (v * (1 + rng.choice([-1.0, 1.0], np.shape(v)) * 2.0 ** -24)).astype(v.dtype)
                 if np.asarray(v).dtype.kind == "f" else v for k, v in s.inputs.items()}
        other = emulated_values(s.model, feeds)
        for q, x in quantizers.items():
            if q in base and q in other and np.shape(base[q]) == np.shape(other[q]):
                d = np.abs(grid_position(other[q], kinds.get(q, 0)) - grid_position(base[q], kinds.get(q, 0)))
                moved[x] = max(moved.get(x, 0.0), float(np.nan_to_num(d, nan=np.inf).max(initial=0.0)))
        moved[""] = max(moved.get("", 0.0), rel_l2([other[o] for o in outputs], [base[o] for o in outputs]))
    return moved


def _conditioned(cell: OpsCell, moves: dict[str, float]) -> None:
    """A mismatch whose departure the graph's own emulation reaches under one rounding of its inputs is
    ill-conditioned, never the backend's: its kernel's steps (read back), else its output departure."""
    m = cell.metrics or {}
    at = re.search(r"kernel that makes (\S+) departs", cell.reason or "")
    if at and at.group(1) in moves:
        departed, moved, unit = float(m.get("kernel_steps") or 0.0), moves[at.group(1)], "steps"
    else:
        departed, moved, unit = float(m.get("departure") or 0.0), moves.get("", 0.0), "relative L2"
    if departed > 0 and moved >= MOVES_AS_FAR * departed:
        cell.status = Status.ILL_CONDITIONED
        cell.reason = (f"ill-conditioned: the quantized graph's own emulation moves by {moved:.3g} {unit} under one "
                       f"float32 rounding of its inputs, as far as the backend departs ({departed:.3g}); as judged: "
                       f"{cell.reason}")


EXPECTED_FROM = ("the quantized graph's exact float64 emulation (every QuantizeLinear, DequantizeLinear, integer "
                 "matmul and convolution computed in float64 with the graph's own scales, zero points, rounding "
                 "half to even and saturation): what the spec says the graph computes on these inputs")


def write_repro(cell: OpsCell, s: OnnxSample, reg, root: Path, observed: list | None = None) -> dict:
    """The failing cell's standalone bundle: the quantized graph as the backend got it, its inputs, the emulation as
    the expectation, and a script using the backend's own API that exits 1 while the verdict re-triggers (a
    mismatch: outputs more than LOCAL_STEPS steps from the emulation, where the output has a step; else the
    judge's own relative-L2 line); its REPORT.md beside. A bundle that cannot be written says why."""
    from fpdiff.analysis import repro as bundle
    from fpdiff.analysis.ops import repro as ops_repro
    from fpdiff.analysis.ops import verdict
    from fpdiff.core.versions import report_versions
    from fpdiff.judging import quantized as judge
    from fpdiff.onnxtools.emulate import emulate
    out = root / ops_repro.signature(cell) / verdict.repro_name(cell)
    try:
        inits = {t.name for t in s.model.graph.initializer}
        inputs = [s.inputs[i.name] for i in s.model.graph.input if i.name not in inits]
        emu = emulate(s.model, s.inputs)
        rule, limit, extra = _rule(cell, emu, judge)
        versions = report_versions(["onnx", *reg.cls(cell.backend).requires])
        meta = {"op": cell.op, "catalog": cell.catalog, "case": cell.case, "variant": cell.variant,
                "shape_variant": cell.shape_variant, "status": str(cell.status), "description": cell.description,
                "expected_from": EXPECTED_FROM, "artifact": "quantized ONNX graph (`segment.onnx`)",
                "observed_error": cell.reason if rule in (bundle.RAISES,
                                                                                          bundle.CRASH) else None,
                **extra}
        script = bundle.write(out, bundle.Bundle(
            title=ops_repro.title(cell), tool="ops", backend=reg.create(cell.backend),
            precision=prec.quantized(cell.precision), device="cpu", program=s.model, inputs=inputs,
            expected=list(emu.outputs), observed=observed, rule=rule, limit=limit, baseline=None,
            baseline_label="the exact emulation", flags=(), versions=versions, extra=meta))
        (out / "REPORT.md").write_text(ops_repro.upstream_report(cell, out, versions))
    except Exception as e:  # noqa: BLE001 - the verdict stands without its repro; the report says why
        return {"path": None, "retriggers": None, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    return {"path": str(script), "retriggers": None, "rule": rule, "limit": limit}


def _rule(cell: OpsCell, emu, judge) -> tuple[str, float, dict]:
    """The bundle's rule with the verdict's own limit: a failure raises or crashes; a mismatch is steps from the
    emulation where every output has one step, else the output-level line (DEPART_SHARE x the format's cost, at
    least FLOOR)."""
    from fpdiff.analysis import repro as bundle
    if cell.status == Status.CRASH:
        return bundle.CRASH, 0.0, {}
    if cell.status != Status.MISMATCH:
        return bundle.RAISES, 0.0, {}
    steps = {x for x in emu.steps}
    if len(steps) == 1 and None not in steps:
        return bundle.STEPS, judge.LOCAL_STEPS, {"step": float(steps.pop())}
    loss = float((cell.metrics or {}).get("quantization_loss") or 0.0)
    return bundle.REL_L2, max(judge.DEPART_SHARE * loss, judge.FLOOR), {}


def support_of(cell: OpsCell) -> tuple[str | None, str]:
    """A quantized cell's support in the runtime's word: not-implemented where it refused the graph; other-dtype
    where it ran quantized compute nodes in float (dequantized: the left-float finding, read from its runtime's
    graph); native where it ran them in integer kernels; None where it failed before saying."""
    from fpdiff.analysis.ops.support import RAN
    from fpdiff.core.support import NATIVE, NOT_IMPLEMENTED, OTHER_DTYPE
    from fpdiff.judging.quantized import LEFT_FLOAT
    if cell.status == Status.UNSUPPORTED:
        return NOT_IMPLEMENTED, " ".join(cell.reason.split())[:300]
    if str(cell.status) not in RAN | {Status.QUANTIZATION_LOSS.value}:
        return None, ""
    left = next((f for f in cell.findings if getattr(f, "kind", "") == LEFT_FLOAT), None)
    if left is not None:
        return OTHER_DTYPE, f"left-float: {' '.join(left.message.split())[:280]}"
    ops = cell.info.get("integer_ops") or {}
    said = ", ".join(f"{k} {v}" for k, v in ops.items()) if isinstance(ops, dict) else str(ops)
    return NATIVE, f"ran in integer kernels{': ' + said if said else ''}"


def _kept(info: dict) -> dict:
    """What of a quantized cell's info the sweep keeps: the scheme, the backend's integer kernels, the worker."""
    return {k: v for k, v in info.items() if k in ("scheme", "integer_ops", "float_ops", "quantized_by", "worker",
                                                   "traceback", "log_tail")}
