"""A quantized cell judged by three readings: the float64 source (truth), the exact float64 emulation of the
quantized model the backend ran (what the format costs: onnxtools/emulate.py), and the backend's own output. The
format's cost is never charged to the backend and the backend's departure is never hidden in the format's cost.

The rules, each with its reason:
- mismatch, where the backend's quantized tensors are read back (the emulation fed them kernel by kernel): a kernel
  more than LOCAL_STEPS from the emulation given the same inputs. A healthy integer kernel computes the emulation's
  integers exactly; where it differs, a requantization rounds the other way (its scale product in float32, a float
  op between quantized ones in float32 where the emulation has float64): one element, one step. The steps are
  counted beyond what float32 arithmetic of the kernel's own inputs can reach (onnxtools/reach.py): e4m3's grid
  near zero is finer than a cancelling Conv's float32 error, and a healthy fp8 kernel lands steps away there.
- mismatch, where nothing is read back: the backend departs from the emulation (relative L2) by more than
  DEPART_SHARE times what the format itself costs (the emulation against float64), and by more than FLOOR. One-step
  differences amplify downstream: a healthy ONNX Runtime whose every kernel is within a step (read back) departs by
  up to 0.72x the format's cost at the output (Whisper, int8: 233 kernels, 6 of them a step away somewhere; the
  corpus, BENCHMARKS.md). 1.5x leaves twice that margin; a wrong zero point, saturation or rounding mode, or a
  fusion that changes the numbers, departs by several times the cost.
- FLOOR (fp32's tolerance): the float ops between quantized ones run in float32 on the backend and in float64 in
  the emulation; where almost nothing is quantized, that alone is the departure.
- quantization-loss: the backend matches the emulation and its output departs from float64 beyond the format's
  tolerance (core/precision.py QUANTIZED): what the format costs on this model, not a backend bug.
- pass: within the tolerance, matching the emulation.
In quantization steps: where a per-tensor DequantizeLinear makes an output, its departure is also given in steps of
that output (the largest, and the share of elements a step or more away), the unit a kernel's rounding works in."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fpdiff.core import compare
from fpdiff.core.compare import Finding
from fpdiff.core.errors import QUANTIZE, QUANTIZED_NONE
from fpdiff.core.precision import FP32, Precision
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.onnxtools.emulate import Activation, Emulation, Local
from fpdiff.onnxtools.weights import REWRITE_FLOOR, rel_l2  # noqa: F401 - rel_l2 is this module's too

DEPART_SHARE = 1.5
LOCAL_STEPS = 1.0
FLOOR = FP32.tolerance
LEFT_FLOAT = "left-float"  # the finding of compute nodes the backend ran in float, not in the format
COARSE_LEVELS = 16  # an activation using fewer levels than this on values that vary: its scale is too coarse
COARSE_VALUES = 64  # ... over at least this many values (a scalar's one level is no finding)
SHOWN = 5  # calibration findings shown per cell, the worst first


def steps(got: Sequence[np.ndarray], emu: Emulation) -> tuple[float | None, float | None]:
    """(largest departure, share of elements one step or more away), in steps of the outputs that have one."""
    worst, far, total = None, 0, 0
    for g, e, step in zip(got, emu.outputs, emu.steps):
        if step is None or not step > 0:
            continue
        d = np.abs(np.asarray(g, np.float64) - e) / step
        worst = max(worst or 0.0, float(d.max(initial=0.0)))
        far, total = far + int(np.count_nonzero(d >= 1 - 1e-6)), total + d.size
    return worst, (far / total if total else None)


def judge(cell: Cell, p: Precision, truth: Sequence[np.ndarray] | None, emu: Emulation, got: Sequence[np.ndarray],
          tool: str = "the quantizer", local: Emulation | None = None, output_ops: Sequence[str | None] = ()
          ) -> Cell:
    """The cell's verdict and its three numbers from the three readings. Three answers come before any number: a
    quantizer that quantized nothing (the format is not on this model at all: unsupported, with what it left), a
    quantized model that computes non-finite outputs where float64 is finite before any kernel runs (its emulation
    does: the quantizer's error, with the scales of 0 that make it), and constants stored with a scale of 0 that
    dequantize to 0 though their values are not (the quantizer's error too, findings/quant-010). Without a float
    source (`truth` None: a quantized file judged alone) the format's cost is unknown: only the kernels read back
    can decide. `output_ops`: the op making each output, for a float tail's departure on a bounded op."""
    if not emu.quantizers:
        cell.status, cell.reason = Status.UNSUPPORTED, (
            f"{tool} {QUANTIZED_NONE} in {p.name}: the graph it made holds no quantized tensor")
        return cell
    if not _finite_where(emu.outputs, truth):
        zeros = f": a scale of 0 or inf for {', '.join(emu.zero_scales[:8])}" if emu.zero_scales else ""
        cell.status, cell.reason = Status.ERROR, (
            f"the quantized model itself computes non-finite outputs where float64 is finite (its exact emulation, "
            f"before any kernel){zeros}")
        cell.stage, cell.component = QUANTIZE, tool
        return cell
    if truth is None:
        return quantizers_own(_judge_alone(cell, emu, got, local, output_ops), zeroed_constants(emu, tool), tool)
    loss, departure, total = rel_l2(emu.outputs, truth), rel_l2(got, emu.outputs), rel_l2(got, truth)
    worst, far = steps(got, emu)
    cell.metrics = {"rel_l2": total, "quantization_loss": loss, "departure": departure,
                    "departure_steps": worst, "share_a_step_away": far}
    in_steps = f"; {worst:.3g} steps at most at the output" if worst is not None else ""
    wrong = _departing_kernel(cell, got, local) if local is not None else _departing_output(departure, loss, in_steps)
    cell.findings.extend(tail_reading(cell, got, local, output_ops) if wrong else [])
    if wrong:
        status, why = Status.MISMATCH, wrong
    elif total > p.tolerance:
        status, why = Status.QUANTIZATION_LOSS, (
            f"what {p.name} costs on this model: the exact emulation departs from float64 by {loss:.3g} (tolerance "
            f"{p.tolerance:g}), and the backend matches it ({departure:.3g}{in_steps}{_within(local)})")
    else:
        status, why = Status.PASS, (f"{total:.3g} from float64 (tolerance {p.tolerance:g}); the backend matches the "
                                    f"emulation ({departure:.3g}{in_steps}{_within(local)})")
    cell.status, cell.reason = status, why
    cell.findings.extend(coarse_outputs(truth, emu) + calibration_findings(emu.activations))
    return quantizers_own(cell, zeroed_constants(emu, tool), tool)


def zeroed_constants(emu: Emulation, tool: str) -> Finding | None:
    """Constants the quantizer stored with a scale of 0 though their values are not the zero point: the quantized
    model computes them as 0 (a constant of one value gets a scale of 0 from its spread, findings/quant-010)."""
    if not emu.zeroed:
        return None
    shown = ", ".join(t.removesuffix("_quantized") for t in emu.zeroed[:4])
    return Finding("quantizer-zeroed-constants", (
        f"{tool} stored {len(emu.zeroed)} constant{'s' * (len(emu.zeroed) != 1)} with a scale of 0, so they "
        f"dequantize to 0 ({shown}{', ...' if len(emu.zeroed) > 4 else ''}): a constant of one value gets a scale "
        "of 0 from its spread (findings/quant-010), and the quantized model computes without it"),
        remedy="give the constant's scale (ONNX Runtime: TensorQuantOverrides) or leave the node that reads it float")


def quantizers_own(cell: Cell, f: Finding | None, tool: str) -> Cell:
    """A quantized model the quantizer itself made wrong (`f`, its finding): said on every verdict, and a loss is
    then the quantizer's error, never what the format costs, since the two cannot be told apart. A pass stays a pass
    (the damage is within the tolerance) and a mismatch stays the backend's (it departs from the model it was
    given, whatever that model is)."""
    if f is None:
        return cell
    cell.findings.append(f)
    if cell.status == Status.QUANTIZATION_LOSS:
        cell.status, cell.stage, cell.component = Status.ERROR, QUANTIZE, tool
        cell.reason = f"{f.message}; so the loss is not the format's. As judged: {cell.reason}"
    return cell


def _judge_alone(cell: Cell, emu: Emulation, got: Sequence[np.ndarray], local: Emulation | None,
                 output_ops: Sequence[str | None]) -> Cell:
    """A quantized file with no float source: the backend against the file's own emulation, kernel by kernel."""
    departure = rel_l2(got, emu.outputs)
    worst, far = steps(got, emu)
    cell.metrics = {"rel_l2": None, "quantization_loss": None, "departure": departure, "departure_steps": worst,
                    "share_a_step_away": far}
    wrong = _departing_kernel(cell, got, local) if local is not None else None
    if wrong:
        cell.status, cell.reason = Status.MISMATCH, wrong
        cell.findings.extend(tail_reading(cell, got, local, output_ops))
    elif local is not None and local.local:
        cell.status, cell.reason = Status.PASS, (f"the backend matches the file's exact emulation ({departure:.3g}"
                                                 f"{_within(local)}); no float source, so the format's cost is not "
                                                 "measured (give the float model as MODEL and this file as --artifact)")
    else:
        cell.status, cell.reason = Status.UNJUDGED, (
            f"no float source and no quantized tensor read back: the departure from the file's emulation "
            f"({departure:.3g}) cannot be weighed against what the format costs (give the float model as MODEL and "
            "this file as --artifact)")
    cell.findings.extend(calibration_findings(emu.activations))
    return cell


def _departing_output(departure: float, loss: float, in_steps: str) -> str | None:
    """Without the backend's quantized values: the output-level rule (DEPART_SHARE of the format's cost)."""
    if departure <= max(DEPART_SHARE * loss, FLOOR):
        return None
    return (f"the backend departs from the exact emulation of its own quantized model by {departure:.3g} (relative "
            f"L2{in_steps}), more than {DEPART_SHARE:g} x the format's own cost ({loss:.3g}): not what the format "
            "costs, the backend computes something else")


def _departing_kernel(cell: Cell, got: Sequence[np.ndarray], local: Emulation) -> str | None:
    """With the backend's quantized values read back (the emulation fed them, quantizer by quantizer): the first
    kernel more than LOCAL_STEPS from the emulation given the same inputs, or outputs that depart from what the
    backend's own last quantized values make."""
    cell.metrics["kernels"] = len(local.local)
    cell.metrics["kernel_steps"] = max((k.steps for k in local.local), default=0.0)
    cell.metrics["kernels_a_step_away"] = sum(k.off > 0 for k in local.local)
    cell.metrics["kernel_steps_beyond_float32"] = max((kernel_steps(k) for k in local.local), default=0.0)
    bad = next((k for k in local.local if kernel_steps(k) > LOCAL_STEPS), None)
    if bad is not None:
        past = "" if bad.beyond is None else f", {bad.beyond:.3g} beyond what float32 arithmetic of them can reach"
        return (f"the backend's kernel that makes {bad.tensor} departs from the emulation fed its own inputs by "
                f"{bad.steps:.3g} steps ({bad.off} of {bad.values} values a step or more away{past}): beyond the "
                "one step a requantization may round the other way")
    after, (limit, why) = rel_l2(got, local.outputs), tail_limit(local)
    cell.metrics["tail_departure"], cell.metrics["tail_limit"] = after, limit
    worst, _ = steps(got, local)
    if (after > limit and worst is None) or (worst is not None and worst > LOCAL_STEPS):
        at = f" ({worst:.3g} steps)" if worst is not None else f" (limit {limit:.3g}: {why})"
        return (f"the outputs depart by {after:.3g}{at} from what the backend's own last quantized values make "
                "through the rest of the graph: a kernel after the last quantizer computes something else")
    return None


def tail_limit(local: Emulation) -> tuple[float, str]:
    """How far a healthy backend's float ops after the last quantizers may take the outputs from the float64
    emulation: FLOOR, or the float32 baseline of those ops (the reference evaluator's) times check's baseline
    factor, where that is more. A sigmoid's tail after a cancelling Gemm departs far in relative terms in healthy
    float32 (openWakeWord's hey_jarvis at int8 on ONNX Runtime: 2.2e-4, one output element)."""
    if local.tail32 is None:
        return FLOOR, "fp32's tolerance; the ops there did not run alone in float32"
    base = rel_l2(local.tail32, local.outputs)
    numel = sum(np.size(o) for o in local.outputs if np.asarray(o).dtype.kind == "f")
    factor = compare.BASELINE_FACTOR if numel >= compare.SMALL_NUMEL else compare.SMALL_BASELINE_FACTOR
    if not np.isfinite(base) or factor * base <= FLOOR:
        return FLOOR, f"fp32's tolerance; the same ops in float32 depart by {base:.3g}"
    return factor * base, f"{factor:g}x the same ops' departure in float32, {base:.3g}"


REMOVABLE = ("Relu", "Clip")  # activations a quantizer may fold into the QuantizeLinear after them


def rewritten(apart: float, weights_cost: float, first: str | None, node: str | None, tool: str
              ) -> Finding | None:
    """A weight-only quantizer whose graph computes something other than the float graph with its own rounded
    weights (both in float64, onnxtools/weights.py `rewrite`): the difference is its rewrite, not the format (NNCF
    3.4's compress_weights on ONNX passes a MatMul's bias into MatMulNBits and keeps the Add after it, so the bias
    is added twice, findings/quant-015). None: the graph is the float graph with its weights rounded."""
    if apart <= REWRITE_FLOOR:
        return None
    where = f", first at {first} (made by {node})" if first else ""
    return Finding("quantizer-rewrite", f"{tool}'s graph computes something other than the float model with its "
                   f"own rounded weights: {apart:.3g} apart (relative L2, both in float64{where}), while rounding "
                   f"the weights alone costs {weights_cost:.3g}", op=node.split(" ")[0] if node else None,
                   remedy="the quantizer changed the model beyond rounding its weights: compare its graph with the "
                   "float graph at that node, and report it to the quantizer's project")




def dropped_activations(p: Precision, float_ops: dict[str, int], quantized_ops: dict[str, int],
                        tool: str) -> Finding | None:
    """A quantizer that removed Relu or Clip nodes from an fp8 graph made a model that computes without them: it
    folds each into the QuantizeLinear after it, as for uint8, whose zero point at the type's lowest clamps the
    negatives, but e4m3 is symmetric and clamps nothing (onnxruntime.quantization 1.32 at fp8 with its default
    options: ResNet loses its 5 ReLUs, findings/quant-011)."""
    gone = {op: float_ops.get(op, 0) - quantized_ops.get(op, 0) for op in REMOVABLE}
    gone = {op: n for op, n in gone.items() if n > 0}
    if p.name != "fp8" or not gone:
        return None
    said = " and ".join(f"{n} of the model's {float_ops[op]} {op} nodes" for op, n in gone.items())
    return Finding("quantizer-dropped-activations", (
        f"{tool} removed {said} from the fp8 graph, folding each into the QuantizeLinear after it as for uint8, whose "
        "zero point clamps the negatives; e4m3 clamps nothing, so the quantized model computes without them "
        "(findings/quant-011)"), remedy="onnxruntime.quantization: extra_options={'ActivationSymmetric': True}")


def tail_reading(cell: Cell, got: Sequence[np.ndarray], local: Emulation | None,
                 output_ops: Sequence[str | None]) -> list[Finding]:
    """Where the float ops after the last quantizer depart and the outputs are a bounded op's, tiny against its
    range: both readings of it (judging/conditioning.bounded_reading, check's relative-vs-absolute finding). ONNX
    Runtime's Sigmoid is accurate to about 1e-8 absolute, not relative: a wake word's 7.3e-5 probability departs
    2.2e-4 relative (onnxruntime issues 22557, 26281), what check says of the same graph in fp32."""
    m = cell.metrics or {}
    if local is None or not m.get("tail_departure", 0.0) > m.get("tail_limit", np.inf):
        return []
    from fpdiff.judging.conditioning import bounded_reading
    f = bounded_reading(local.outputs, got, list(output_ops), FLOOR, "fp32")
    return [f] if f else []


def double_rounding(local: Emulation, via16: Emulation) -> list[Finding]:
    """Where an fp8 backend's kernels beyond a step of the spec's emulation come within one of a what-if emulation
    that rounds x / scale to float16 before e4m3: the backend converts in two steps (OpenVINO does by design,
    findings/quant-009). The spec rounds once, so the verdict stands; this says why, and how much it explains."""
    far = {k.tensor for k in local.local if kernel_steps(k) > LOCAL_STEPS}
    near = {k.tensor for k in via16.local if kernel_steps(k) <= LOCAL_STEPS}
    explained = far & near
    if not explained:
        return []
    left = sorted(far - explained)
    rest = (f"; {len(left)} still are ({', '.join(left[:3])}: another cause, such as a folded weight quantizer "
            "rounding its own way)") if left else ""
    return [Finding("fp8-double-rounding", f"{len(explained)} of the {len(far)} kernels more than {LOCAL_STEPS:g} "
                    f"step from the emulation are within it when x / scale is rounded to float16 before e4m3{rest}: "
                    "the backend converts float32 to e4m3 in two steps, where the ONNX spec rounds once (a value just "
                    "below a midpoint lands on it, and the tie goes to the even neighbour)", remedy=(
                        "expect this backend's fp8 values to sit a step from the spec's where a value is near a "
                        "midpoint, and values near zero after them to move by many steps; compare fp8 backends "
                        "on their outputs' task metric, not bit for bit"))]


def kernel_steps(k: Local) -> float:
    """The steps a kernel is judged by: those beyond float32's reach where its ops have a bound, else the raw."""
    return k.steps if k.beyond is None else k.beyond


def _within(local: Emulation | None) -> str:
    """What the read-back shows of a matching backend: its kernels each within a step."""
    if local is None or not local.local:
        return ""
    off = sum(k.off > 0 for k in local.local)
    return (f"; each of its {len(local.local)} quantized kernels within {LOCAL_STEPS:g} step of the emulation fed "
            f"its own inputs, {off} of them a step away somewhere")


def _finite_where(outs: Sequence[np.ndarray], truth: Sequence[np.ndarray] | None) -> bool:
    """Whether every float output is finite wherever float64's is (everywhere, without a float source)."""
    if truth is None:
        return all(bool(np.isfinite(o).all()) for o in outs if np.asarray(o).dtype.kind == "f")
    return all(bool(np.isfinite(o)[np.isfinite(t)].all()) for o, t in zip(outs, truth)
               if np.asarray(t).dtype.kind == "f" and np.shape(o) == np.shape(t))


def coarse_outputs(truth: Sequence[np.ndarray], emu: Emulation) -> list[Finding]:
    """Outputs whose quantization step is coarse against their own values: most float64 values lie within half a
    step of the zero point, so the format gives them nothing but a few levels (a softmax over 1,000 classes in
    uint8 steps of 1/256)."""
    found = []
    for i, (t, step) in enumerate(zip(truth, emu.steps)):
        t = np.asarray(t, np.float64)
        if step is None or t.dtype.kind != "f" or not t.size:
            continue
        small = float(np.mean(np.abs(t) < step / 2))
        if small > 0.5:
            found.append(Finding("coarse-output", f"output {i}: {small:.0%} of its float64 values are within half a "
                                 f"step ({step:.3g}) of zero (max |x| {np.abs(t).max():.3g}), so they quantize to the "
                                 "zero point", remedy="keep this output's last op in float, or quantize it with a "
                                 "finer scale"))
    return found


def calibration_findings(activations: Sequence[Activation]) -> list[Finding]:
    """Activations whose calibrated range clipped the judged inputs, and ones whose scale left a few levels."""
    found = []
    clipped = sorted((a for a in activations if a.clipped), key=lambda a: -a.clipped / a.values)
    for a in clipped[:SHOWN]:
        found.append(Finding("calibration-clips", f"{a.tensor}: {a.clipped} of {a.values} values "
                             f"({a.clipped / a.values:.2%}) outside its calibrated range [{a.range[0]:.4g}, "
                             f"{a.range[1]:.4g}], saturated; the judged inputs reach [{a.seen[0]:.4g}, "
                             f"{a.seen[1]:.4g}]: calibrate on inputs that cover them"))
    coarse = [a for a in activations if a.levels < COARSE_LEVELS and a.values >= COARSE_VALUES
              and a.seen[1] > a.seen[0]]
    for a in coarse[:SHOWN]:
        found.append(Finding("coarse-scale", f"{a.tensor}: its {a.values} values take {a.levels} levels of the "
                             f"format's grid (range [{a.range[0]:.4g}, {a.range[1]:.4g}] for values in "
                             f"[{a.seen[0]:.4g}, {a.seen[1]:.4g}]): the scale is so coarse its output is a few levels"))
    return found


def optimizer_finding(record: dict) -> list[Finding]:
    """Where the backend's own graph optimizations change the quantized model's numbers (all on against all off):
    by how much at the outputs, which quantized tensors they move by more than a step (a rewrite later quantizers
    absorb still moves its kernel), and the passes that each alone take the change away."""
    effect = record.get("optimizer") or {}
    moved, kernels = effect.get("changes_numbers") or 0.0, effect.get("moves_quantized") or {}
    said = []
    if moved > FLOOR:
        by = effect.get("by") or []
        said.append((f"the backend's graph optimizations change the outputs by {moved:.3g} (relative L2, all on "
                     f"against all off): {_taken_away(by)}", by))
    if kernels:
        worst, first = max(kernels, key=kernels.get), next(iter(kernels))  # the record keeps graph order
        by = effect.get("by_kernels") or []
        who = "they" if said else "the backend's graph optimizations"
        where = (f"at {first}, {kernels[first]:.3g} steps" if len(kernels) == 1 else
                 f"first at {first} ({kernels[first]:.3g} steps), up to {kernels[worst]:.3g} at {worst}; a tensor "
                 "after a moved one may move only because its inputs did")
        said.append((f"{who} move {len(kernels)} quantized tensor{'s' * (len(kernels) != 1)} by more than a step "
                     f"({where}; all on against all off, the tensors read back): {_taken_away(by)}", by))
    if not said:
        return []
    first = next((by[0] for _, by in said if by), None)
    return [Finding("optimizer-changes-numbers", "; ".join(text for text, _ in said), op=first)]


def _taken_away(by: Sequence[str]) -> str:
    return (f"disabling {' or '.join(by)} alone takes the change away" if by else
            "no one optimization disabled alone takes it away")


def left_float(record: dict) -> list[Finding]:
    """The compute nodes the backend's graph ran in float in a quantized cell: the quantized world's dtype-changed."""
    n = int(record.get("float_ops") or 0)
    if not n:
        return []
    ints = record.get("integer_ops") or {}
    shown = ", ".join(record.get("left_float") or [])
    return [Finding(LEFT_FLOAT, f"{n} compute node{'s' * (n != 1)} ran in float, not in the format "
                    f"({sum(ints.values())} in integers: {', '.join(f'{k} {v}' for k, v in ints.items()) or 'none'})"
                    f": {shown}", remedy="a node the quantizer left unquantized, or one whose quantized pattern "
                    "the runtime did not fuse into an integer kernel: its numbers are the float model's there")]


# how many layers `costs` names: the few a user would leave in float first (fpdiff plan's search does the rest)
COSTS_SHOWN = 5
# how many of them a quantization-loss cell leaves in float one at a time, in the emulation, to measure what each
# costs at the output: the ones whose own layer added the most drift (one emulation of the model each)
ABLATED = 12


def costs(activations: Sequence[Activation], upstream: dict[str, list[str]], top: int = COSTS_SHOWN,
          recovered: dict[str, float] | None = None) -> list[dict]:
    """Where the format costs most: each quantized activation against the float model's own value (its drift,
    everything upstream included), less the largest drift arriving from the quantized activations upstream of it:
    what its own layer added. Ranked by what was added; where `recovered` measured it (the output's loss with that
    activation left in float, taken from the cell's loss), by that, which is what keeping it float buys (those that
    buy nothing are left out)."""
    drift = {a.tensor: a.drift for a in activations if a.drift is not None}
    rows = [{"tensor": t, "drift": d, "added": d - max((drift[u] for u in upstream.get(t, []) if u in drift),
                                                         default=0.0)} for t, d in drift.items()]
    if recovered:
        rows = [{**r, "recovers": recovered[r["tensor"]]} for r in rows if recovered.get(r["tensor"], 0.0) > 0]
        return sorted(rows, key=lambda r: -r["recovers"])[:top]
    return sorted(rows, key=lambda r: -r["added"])[:top]


# ops shown per layer: the kernel's own ops (a Conv and its Relu), not a whole float region the quantizer skipped
KERNEL_OPS_SHOWN = 6


def layers(activations: Sequence[Activation], upstream: dict[str, list[str]], local: Emulation | None,
           ops: dict[str, list[str]], recovered: dict[str, float] | None = None) -> list[dict]:
    """Every quantized activation in graph order, both readings a user bisects by: where the format costs (its drift
    against the float model, what its own layer added, what leaving it in float recovers at the output where that
    was measured) and where the backend departs (its kernel against the emulation fed the backend's own inputs, in
    steps; None where nothing was read back)."""
    drift = {a.tensor: a.drift for a in activations}
    kernel = {k.tensor: k for k in (local.local if local is not None else [])}
    rows = []
    for a in activations:
        came = max((drift[u] or 0.0 for u in upstream.get(a.tensor, []) if u in drift), default=0.0)
        k, made = kernel.get(a.tensor), ops.get(a.tensor, [])
        rows.append({"tensor": a.tensor, "ops": made[-KERNEL_OPS_SHOWN:],
                     "ops_before": max(0, len(made) - KERNEL_OPS_SHOWN),
                     "drift": a.drift, "added": None if a.drift is None else a.drift - came,
                     "recovers": (recovered or {}).get(a.tensor), "values": a.values, "clipped": a.clipped,
                     "levels": a.levels, "steps": None if k is None else k.steps, "off": None if k is None else k.off,
                     "beyond": None if k is None else kernel_steps(k)})
    return rows


def departing_layer(rows: Sequence[dict]) -> dict | None:
    """The first layer, in graph order, whose kernel departs from the emulation fed its own inputs by more than
    LOCAL_STEPS beyond float32's reach (the mismatch rule's own bound): where the backend computes something else."""
    return next((r for r in rows if r["beyond"] is not None and r["beyond"] > LOCAL_STEPS), None)


def hurting_layers(rows: Sequence[dict], top: int = COSTS_SHOWN) -> list[dict]:
    """The layers where the format costs most: first those whose leaving in float was measured to recover some of
    the output's loss, by that; then the rest by what its own layer added to the drift."""
    gains = sorted((r for r in rows if (r["recovers"] or 0.0) > 0), key=lambda r: -r["recovers"])
    rest = sorted((r for r in rows if r["added"] is not None and r not in gains), key=lambda r: -r["added"])
    return (gains + rest)[:top]
