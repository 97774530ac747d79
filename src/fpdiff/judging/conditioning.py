"""A model that cannot answer is not a backend bug. Before a cell is called `mismatch`, the float64 reference is run
again on its own inputs and weights perturbed at the cell's unit roundoff: when the reference itself moves as far as
the cell departs, the output is ill-conditioned at this input (tied logits, a softmax over near-equal huge logits),
and rounding alone explains the departure: `ill-conditioned`, with both numbers, instead of `mismatch`.

Also, for any cell that fails on relative error: when its outputs come from an op with a bounded range (Sigmoid,
Softmax, Tanh) and are tiny against that range, the departure is large relative but small absolute; which one
matters depends on what the output means, so the cell says both, with the numbers, and names the op."""
from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding
from fpdiff.core.status import Status
from fpdiff.model.graph import STATIC
from fpdiff.runtime import external, jobdata
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import OK
from fpdiff.sources.base import SourceRef, digest

# Perturbed float64 reference runs per precision, each with its own seed; the spread is the largest of them. Only
# precisions with a `mismatch` cell pay for them, and the runs stop as soon as every mismatch there is within the
# spread (it only grows). At most 4: the largest of 4 samples is within ~1.5x of the largest possible for the
# outputs seen (tied logits, softmax), and a cell that stays `mismatch` costs 4 reference runs, which a mismatch
# may spend.
RUNS = 4
# The rule. A mismatch cell is ill-conditioned when (a) the perturbed reference itself leaves the precision's
# tolerance (relative L2 over it, or worst element over 10x it, the two limits of a pass): perturbations the size
# of one rounding already make the answer unattainable at this precision, so the model cannot answer here; and
# (b) the cell's relative L2 and worst-element error are both within FACTOR times the reference's largest movement.
# (a) keeps every well-conditioned model out whatever the factor: there the reference moves by a few u, far under
# any tolerance (fp32's is ~170 u), so a real bug stays `mismatch`.
# Why 16 for (b): the perturbation rounds each input and weight once (relative size at most u) but not the
# intermediate results a backend rounds at every op. A dot product of n terms moves by ~u|y|/sqrt(n) when its
# weights move by u, while rounding its own result moves it by u|y|: on cond_softmax_tied (tied logits ~1e4, n = 32)
# a correct backend summing in another order departs 7.8x the reference's largest movement. 16 (compare.MAX_FACTOR,
# the factor for maxima of error samples) leaves 2x above that.
FACTOR = compare.MAX_FACTOR
# Unit roundoff of the format a cell computes in. tf32 computes in float32 containers with 11-bit significands.
TF32_UNIT_ROUNDOFF = 2.0 ** -11
# ONNX float constants with at least this many elements are weights; a scalar is structural (an exponent, an
# epsilon, a clip bound) and perturbing it can change the computation itself (x ** 2.0000001 of a negative x is NaN).
MIN_WEIGHT_NUMEL = 2
# Ops whose float inputs other than the first are not data: the perturbation must not change a shape or a range.
NOT_DATA = {"Range", "Resize", "Upsample", "Pow", "Clip", "Loop", "If", "Scan"}
MATERIALIZE_LIMIT = 1 << 24  # ConstantOfShape weights written out as a perturbed Constant up to this many elements
# Ops whose outputs lie in a bounded range, with the range: an error tiny against the range is tiny absolute.
BOUNDED = {"Sigmoid": (0.0, 1.0), "HardSigmoid": (0.0, 1.0), "Softmax": (0.0, 1.0), "Tanh": (-1.0, 1.0),
           "Softsign": (-1.0, 1.0), "sigmoid": (0.0, 1.0), "hardsigmoid": (0.0, 1.0), "softmax": (0.0, 1.0),
           "tanh": (-1.0, 1.0), "softsign": (-1.0, 1.0)}
# Outputs are "tiny against the range" when their largest magnitude is under this fraction of the range's width:
# then relative and absolute readings of one error differ by over 100x and the verdict depends on which is meant.
TINY_FRACTION = 1e-2
# Ops an output passes through unchanged in value on its way out (a reshape of a Sigmoid is still in (0, 1)).
PASS_THROUGH = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Transpose", "Cast", "view", "reshape",
                "squeeze", "unsqueeze", "flatten", "permute", "transpose", "contiguous", "clone", "to", "float",
                "double", "__getitem__", "detach"}


@dataclass
class Spread:
    """How far the float64 reference moves under perturbations at one precision's unit roundoff."""
    precision: str
    unit_roundoff: float
    runs: int
    rel_l2: float  # largest relative L2 of a perturbed reference against the unperturbed one
    max_norm: float  # largest worst-element error (of max |reference|)
    perturbed: str  # what was perturbed: "inputs and weights", or why only the inputs
    tolerance: float  # the precision's tolerance: a spread beyond it means no answer is attainable at this precision
    seconds: float
    failed: str | None = None  # why the spread could not be measured

    def as_dict(self) -> dict:
        return {k: compare.json_float(v) for k, v in self.__dict__.items()}


def unit_roundoff(p: prec.Precision) -> float:
    """u of the format the cell's arithmetic rounds to: fp32 2^-24, fp16 2^-11, bf16 2^-8."""
    return TF32_UNIT_ROUNDOFF if p.tf32_matmul else p.unit_roundoff


def _factors(shape, u: float, rng: np.random.Generator) -> np.ndarray:
    """1 + u r with r uniform in [-1, 1]: one rounding's worth of relative change per element, at most u."""
    return 1.0 + u * rng.uniform(-1.0, 1.0, size=shape)


def perturb_array(a: np.ndarray, u: float, rng: np.random.Generator) -> np.ndarray:
    """A float array times (1 + u r), in float64 (a float32 container would round the change of fp32's u away);
    integers and booleans (indices, masks) unchanged."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return a
    return np.asarray(a.astype(np.float64) * _factors(a.shape, u, rng))  # a 0-d product is a scalar: kept an array


def perturb_tensor(t: torch.Tensor, u: float, rng: np.random.Generator, keep_dtype: bool) -> torch.Tensor:
    """A float tensor times (1 + u r); `keep_dtype` rounds the result back to the tensor's dtype (weights: a module
    loads its state in its parameters' dtype anyway)."""
    if not t.is_floating_point():
        return t
    out = t.detach().double() * torch.from_numpy(np.asarray(_factors(tuple(t.shape), u, rng), dtype=np.float64))
    return out.to(t.dtype) if keep_dtype else out


def _consumers(graph) -> dict[str, list[tuple[str, int]]]:
    found: dict[str, list[tuple[str, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            found.setdefault(name, []).append((node.op_type, i))
    for o in graph.output:
        found.setdefault(o.name, []).append(("<output>", 0))
    return found


def _weight_like(uses: list[tuple[str, int]] | None) -> bool:
    """Consumed only as data (never as a shape, range bound or exponent) and never returned as is."""
    return bool(uses) and all(op != "<output>" and op not in NOT_DATA or i == 0 and op not in ("Range", "<output>")
                              for op, i in uses)


_FLOAT_TYPES = (1, 10, 11)  # onnx.TensorProto FLOAT, FLOAT16, DOUBLE


def perturbed_onnx(model, u: float, rng: np.random.Generator) -> tuple[object, int]:
    """A copy of the graph with its weights perturbed: float initializers and Constants of at least MIN_WEIGHT_NUMEL
    elements, and ConstantOfShape weights (placeholder models fill whole tensors with one value) written out as
    perturbed Constants. Rounded back to their stored dtype. Returns the copy and how many tensors changed."""
    import onnx
    from onnx import numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    uses = _consumers(m.graph)
    done = 0
    for i, init in enumerate(m.graph.initializer):
        if init.data_type in _FLOAT_TYPES and _weight_like(uses.get(init.name)):
            a = numpy_helper.to_array(init)
            if a.size >= MIN_WEIGHT_NUMEL:
                m.graph.initializer[i].CopyFrom(numpy_helper.from_array(
                    perturb_array(a, u, rng).astype(a.dtype), init.name))
                done += 1
    consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for node in m.graph.node:
        if node.op_type == "Constant" and node.output[0] and _weight_like(uses.get(node.output[0])):
            done += _perturb_constant(node, u, rng)
        elif node.op_type == "ConstantOfShape" and _weight_like(uses.get(node.output[0])):
            done += _materialize(node, consts, u, rng)
        for out in node.output:
            if node.op_type == "Constant" and any(a.name == "value" for a in node.attribute):
                consts[out] = numpy_helper.to_array(next(a.t for a in node.attribute if a.name == "value"))
    return m, done


def _perturb_constant(node, u: float, rng: np.random.Generator) -> int:
    from onnx import numpy_helper
    for attr in node.attribute:
        if attr.name == "value" and attr.t.data_type in _FLOAT_TYPES:
            a = numpy_helper.to_array(attr.t)
            if a.size >= MIN_WEIGHT_NUMEL:
                attr.t.CopyFrom(numpy_helper.from_array(perturb_array(a, u, rng).astype(a.dtype), attr.t.name))
                return 1
    return 0


def _materialize(node, consts: dict, u: float, rng: np.random.Generator) -> int:
    """ConstantOfShape with a known shape: the filled tensor, perturbed element by element, as a Constant."""
    import onnx
    from onnx import numpy_helper
    shape = consts.get(node.input[0]) if node.input else None
    value = next((a.t for a in node.attribute if a.name == "value"), None)
    if shape is None or value is None or value.data_type not in _FLOAT_TYPES:
        return 0
    shape = [int(d) for d in np.asarray(shape).ravel()]
    if math.prod(shape) < MIN_WEIGHT_NUMEL or math.prod(shape) > MATERIALIZE_LIMIT:
        return 0
    fill = numpy_helper.to_array(value).ravel()[0]
    full = perturb_array(np.full(shape, fill), u, rng).astype(fill.dtype)
    node.op_type = "Constant"
    del node.input[:]
    del node.attribute[:]
    node.attribute.append(onnx.helper.make_attribute("value", numpy_helper.from_array(full)))
    return 1


def write_perturbed(source, data_path: str, u: float, rng: np.random.Generator,
                    tag: str) -> tuple[SourceRef, str, str]:
    """The model's data file (and for ONNX its graph) with inputs and weights perturbed; returns the address to run,
    the data file and what was perturbed. A new fingerprint: no compiled artifact of the original is reused."""
    base = Path(data_path)
    data = jobdata.read(data_path)
    data["fingerprint"] = digest(data["fingerprint"], "perturbed", tag)
    if source.ref.kind == "torch":
        data["inputs"] = tuple(perturb_tensor(t, u, rng, keep_dtype=False) if isinstance(t, torch.Tensor) else t
                               for t in data["inputs"])
        data["state"] = {k: perturb_tensor(v, u, rng, keep_dtype=True) for k, v in data["state"].items()}
        floats = any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in data["inputs"])
        ref, what = source.ref, "inputs and weights" if floats else "weights (its inputs are integers)"
    else:
        data["inputs"] = tuple(perturb_array(a, u, rng) for a in data["inputs"])
        model, n = perturbed_onnx(source.module, u, rng)
        path = base.with_name(f"perturbed-{tag}.onnx")
        import onnx
        onnx.save(model, str(path))
        ref = SourceRef(source.ref.kind, str(path), source.ref.label)
        floats = any(np.asarray(a).dtype.kind == "f" for a in data["inputs"])
        what = f"{'inputs and ' * floats}{n} weight tensors" if n else "inputs only (no float weight in the graph)"
    out = jobdata.write(base.with_name(f"perturbed-{tag}.pt"), inputs=data["inputs"], input_names=data["input_names"],
                        fingerprint=data["fingerprint"], state=data.get("state"))
    return ref, out, what


def measure_spread(grid, ref_out, p: prec.Precision, pool, timeout: float,
                   departures: Sequence[tuple[float, float]] = ()) -> Spread:
    """The float64 reference, up to RUNS times on perturbed inputs and weights, against the unperturbed one. The
    spread only grows with more runs, so it stops once every departure given (rel L2, worst element) is within it:
    more runs could not change a verdict."""
    source, data_path, judge_backend, seed = grid.source, grid.data_path, grid.judge_backend, grid.seed
    u = unit_roundoff(p)
    tol = p.tolerance
    t0 = time.perf_counter()
    rel = worst = 0.0
    what = ""
    for k in range(RUNS):
        rng = np.random.default_rng([seed, k, int(-math.log2(u))])
        tag = f"{p.name}-{k}"
        try:
            ref, path, what = write_perturbed(source, data_path, u, rng, tag)
        except Exception as e:  # a graph the perturbation cannot write: no spread, the verdict stands
            return Spread(p.name, u, k, rel, worst, what, tol, time.perf_counter() - t0, f"cannot perturb: {e}")
        r = pool.run(Job(ref, path, judge_backend, prec.FP64, "cpu", STATIC, flags=_judge_flags(judge_backend),
                         seed=seed), timeout)
        if r.status != OK:
            return Spread(p.name, u, k, rel, worst, what, tol, time.perf_counter() - t0,
                          f"the perturbed reference failed: {r.message}")
        if len(r.outputs) != len(ref_out) or any(a.shape != b.shape for a, b in zip(r.outputs, ref_out)):
            return Spread(p.name, u, k, rel, worst, what, tol, time.perf_counter() - t0,
                          "the perturbed reference returns outputs of other shapes")
        m = compare.measure(ref_out, r.outputs, p.compute)
        rel, worst = max(rel, m.rel_l2), max(worst, m.max_norm)
        s = Spread(p.name, u, k + 1, rel, worst, what, tol, time.perf_counter() - t0)
        if departures and all(within(a, b, s) for a, b in departures):
            return s
    return Spread(p.name, u, RUNS, rel, worst, what, tol, time.perf_counter() - t0)


def _judge_flags(judge_backend: str) -> tuple[str, ...]:
    """The flags that make the judge backend's fp64 job the float64 judge (backends/base.py judge_flags)."""
    from fpdiff.backends import judge_flags
    return judge_flags(judge_backend)


def _number(v) -> float | None:
    if isinstance(v, (int, float)):
        return float(v)
    return math.inf if v == "inf" else None


def unattainable(s: Spread) -> bool:
    """Rule (a): perturbations of one rounding move the float64 answer out of the precision's tolerance."""
    return not s.failed and (s.rel_l2 > s.tolerance or s.max_norm > 10 * s.tolerance)


def within(rel_l2: float, max_norm: float, s: Spread) -> bool:
    """The rule (FACTOR above): the answer is unattainable at this precision, and both the cell's relative L2 and
    its worst-element error are within FACTOR times the reference's own largest movement."""
    if not unattainable(s) or not (s.rel_l2 < math.inf) or not math.isfinite(rel_l2) or not math.isfinite(max_norm):
        return False
    return rel_l2 <= FACTOR * s.rel_l2 and max_norm <= FACTOR * s.max_norm


def p_tol(s: Spread) -> str:
    return f"{s.precision}'s tolerance {s.tolerance:.0e}"


def _spread_text(s: Spread) -> str:
    return (f"the float64 reference itself moves by rel L2 {s.rel_l2:.2e} (worst element {s.max_norm:.2e} of max "
            f"|ref|) under perturbations of its {s.perturbed} of relative size {s.unit_roundoff:.1e} ({s.precision}'s "
            f"unit roundoff; largest of {s.runs} run{'s' * (s.runs != 1)})")


def _departure(cell) -> tuple[float | None, float | None]:
    """The cell's relative L2 and worst-element error, as its verdict read them."""
    return _number((cell.metrics or {}).get("rel_l2")), _number((cell.metrics or {}).get("max_norm"))


def apply(cell, s: Spread) -> None:
    """Reclassify one mismatch cell, or say in its reason why its departure is not the model's sensitivity."""
    rel, worst = _departure(cell)
    cell.info["conditioning"] = s.as_dict()
    if rel is None or worst is None:
        return
    if s.failed:
        cell.reason += f"; the model's own sensitivity was not measured ({s.failed})"
        return
    if not within(rel, worst, s):
        why = (f"beyond {p_tol(s)} but the cell departs by {rel:.2e} ({worst:.2e}), over {FACTOR:g}x that"
               if unattainable(s) else f"within {p_tol(s)}: the model can answer at this precision")
        cell.reason += f"; not the model's sensitivity: {_spread_text(s)}, {why}"
        return
    text = (f"{_spread_text(s)}, beyond {p_tol(s)}, and the cell departs by rel L2 {rel:.2e} (worst element "
            f"{worst:.2e}): within {FACTOR:g}x of that, so rounding alone moves the answer this far")
    cell.revise("conditioning", Status.ILL_CONDITIONED, f"{text} (was mismatch: {cell.reason})",
                why=f"{_spread_text(s)}; the cell departs within {FACTOR:g}x of that")
    cell.findings.append(Finding(Status.ILL_CONDITIONED, f"the output is ill-conditioned at this input: {text}",
                                 remedy="judge on an input where the answer is stable (untied logits, separated "
                                 "scores, trained weights); no backend can do better than the model allows"))


def reconsider(ev, cells: list) -> None:
    """Measure the model's own sensitivity at each precision that has a `mismatch` cell (only then: it costs
    reference runs; kept as evidence) and reclassify the cells within it; then the relative-versus-absolute finding
    on failing cells."""
    suspects = [(c, k.precision) for c, k in zip(cells, ev.grid.cells) if c.status == compare.MISMATCH and c.metrics]
    for p in dict.fromkeys(p for _, p in suspects):
        departures = [d for d in (_departure(c) for c, q in suspects if q == p) if None not in d]
        s = ev.keep(f"spread {p.name}", lambda p=p, d=departures: _spread(ev, p, d))
        for c, q in suspects:
            if q == p:
                apply(c, s)
    _relative_only(ev, cells)


def _spread(ev, p: prec.Precision, departures: list) -> Spread:
    """The float64 reference's movement at p's unit roundoff (measure_spread), in the analysis's pool."""
    grid = ev.grid
    with external.pool(ev.env) as pool:
        return measure_spread(grid, ev.ref.outputs, p, pool, ev.timeout, departures)


def _relative_only(ev, cells: list) -> None:
    """The relative-versus-absolute finding on cells that fail on relative error (see bounded_reading)."""
    if not ev.stored:  # kept for every cell that ran, whatever its verdict now: a changed rule may ask of any
        for key in ev.grid.cells:
            ev.keep(f"relative-only {key}", lambda k=key: _relative_only_of(ev, k))
    for c, key in zip(cells, ev.grid.cells):
        if c.status not in (compare.MISMATCH, compare.UNJUDGED, compare.PRECISION_LOSS):
            continue
        f = ev.keep(f"relative-only {key}", lambda k=key: _relative_only_of(ev, k))
        if f:
            c.findings.append(f)
            c.reason += f"; {f.message}"


def _relative_only_of(ev, key) -> Finding | None:
    """One cell's relative-versus-absolute finding from its outputs (None where its job did not run through)."""
    r = ev.results[key]
    if r.status != OK:
        return None
    return relative_only(ev.grid.source, ev.ref.outputs, r.outputs, key.precision.tolerance, key.precision.name)


def relative_only(source, ref_out, outs, tol: float, precision: str) -> Finding | None:
    """bounded_reading on the outputs that depart (a voice detector's tiny probability beside its recurrent state,
    which passes), when each of them is tiny against its op's range and off by little in absolute terms."""
    which = _departing(ref_out, outs, tol)
    if not which or not _small_absolute([ref_out[i] for i in which], [outs[i] for i in which], tol):
        return None
    ops = output_ops(source)
    if len(ops) != len(ref_out):
        return None
    return bounded_reading([ref_out[i] for i in which], [outs[i] for i in which], [ops[i] for i in which], tol,
                           precision)


def _departing(ref_out, outs, tol: float) -> list[int]:
    """The outputs whose own relative L2 error is over the tolerance (all of them when the shapes do not line up)."""
    if len(outs) != len(ref_out):
        return []
    pairs = [(i, np.asarray(a), np.asarray(b)) for i, (a, b) in enumerate(zip(ref_out, outs))]
    return [i for i, a, b in pairs if a.shape == b.shape and compare.rel_l2(a, b) > tol]


def _small_absolute(ref_out, outs, tol: float) -> bool:
    """A cheap gate before naming ops: every output's absolute error within tolerance on a unit scale, and the
    outputs tiny against it."""
    if len(outs) != len(ref_out):
        return False
    for a, b in zip(ref_out, outs):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape or not np.isfinite(b).all() or a.size == 0:
            return False
        if np.abs(a - b).max() > tol or np.abs(a).max() > TINY_FRACTION:
            return False
    return True


def bounded_reading(ref_out, outs, ops: list[str | None], tol: float, precision: str) -> Finding | None:
    """Both readings of a departure on outputs of bounded-range ops that are tiny against their range: relative to
    the values (what failed) and absolute against the op's range (what a probability or a threshold sees)."""
    if not ops or len(ops) != len(ref_out) or any(op not in BOUNDED for op in ops):
        return None
    parts, worst_abs = [], 0.0
    for a, b, op in zip(ref_out, outs, ops):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        lo, hi = BOUNDED[op]
        err = np.abs(a - b)
        worst_abs = max(worst_abs, float(err.max()) / (hi - lo))
        nz = np.abs(a) > 0
        rel = float((err[nz] / np.abs(a[nz])).max()) if nz.any() else 0.0
        parts.append(f"{op} (range [{lo:g}, {hi:g}]): outputs at most {np.abs(a).max():.2e}, error up to "
                     f"{rel:.2g}x relative but {err.max():.2e} absolute")
    return Finding("relative-vs-absolute",
                   f"{'; '.join(parts)}. Read as probabilities or scores against a threshold (absolute, on the "
                   f"op's range) the departure {worst_abs:.2e} is within {precision}'s tolerance {tol:.0e}; read "
                   "relative to the values (log-probabilities, ratios, rare-event odds) it is not: which verdict "
                   "holds depends on what the output means",
                   op=ops[0], remedy="if the small values matter relative, compute the op in log space "
                   "(LogSigmoid, LogSoftmax) or keep it in float64/float32 on this backend")


def output_ops(source) -> list[str | None]:
    """The op producing each model output, looking through reshapes and casts: ONNX node types from the graph,
    torch function names from one recorded forward (a convenience: None where it cannot tell)."""
    try:
        return onnx_output_ops(source.module) if source.ref.kind == "onnx" else _torch_output_ops(source)
    except Exception:
        return []


def onnx_output_ops(model) -> list[str | None]:
    """The op making each output of an ONNX graph (output_ops' ONNX half; a quantized graph's judge asks it too)."""
    return [_made_by(out.name, [model.graph]) for out in model.graph.output]


def _made_by(name: str, scopes: list) -> str | None:
    """The op type that makes value `name`, looking through reshapes and casts, and through an If into its branches
    (a wake-word head's If returns its verifier's Sigmoid or the main one's: both Sigmoid). `scopes`: the graph and
    the graphs enclosing it, innermost last, where an outer name is looked up."""
    node, scope = None, scopes
    for i in range(len(scopes), 0, -1):
        node = next((n for n in scopes[i - 1].node if name in n.output), None)
        if node is not None:
            scope = scopes[:i]
            break
    if node is None:
        return None
    if node.op_type in PASS_THROUGH and node.input:
        return _made_by(node.input[0], scope)
    if node.op_type == "If":
        at = list(node.output).index(name)
        ops = {_made_by(a.g.output[at].name, [*scope, a.g]) for a in node.attribute if a.type == a.GRAPH}
        return ops.pop() if len(ops) == 1 else None
    return node.op_type


def _torch_output_ops(source) -> list[str | None]:
    """One forward under a TorchFunctionMode that records which function made each tensor."""
    made: dict[int, str] = {}

    class Record(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", str(func))
            if name in PASS_THROUGH and args and isinstance(args[0], torch.Tensor) and id(args[0]) in made:
                name = made[id(args[0])]
            if isinstance(out, torch.Tensor):
                made[id(out)] = name
            return out

    keep = []  # every output alive until the lookup: ids of freed tensors are reused
    with torch.no_grad(), Record():
        out = source.module(*source.inputs)
        keep.append(out)
    return [made.get(id(t)) for t in _tensors(out)]


def _tensors(out) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []
