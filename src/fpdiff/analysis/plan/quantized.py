"""A quantized model's plan: the fewest layers its backend's quantizer leaves in float so the quantized model meets
the tolerance against float64 on inputs calibration never saw. The search is ordered by where the format costs (each
quantized layer's drift against the float model and what leaving it float recovers, both from the exact emulation
of the backend's own quantized model: quant's per-layer readings), and every trial is verified where it ships: the
backend's own quantizer quantizes the model again with those layers excluded, its runtime runs it, and the cell is
judged as quant judges one (a backend that departs from its emulation is a mismatch no plan can fix)."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fpdiff.analysis.options import RunOptions
from fpdiff.analysis.plan.search import KeptOp, Plan, Trial, Unit, graph_digest
from fpdiff.analysis.quant import QuantOptions, QuantSession
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import make_grid

# The backends whose quantizer takes a list of nodes to leave float, and how a cell asks for it (the backend flag the
# user would pass to quant): ONNX Runtime's nodes_to_exclude (nodes of its pre-processed float graph), NNCF's
# IgnoredScope names (nodes of the fp32 ONNX graph it quantizes), each by the names its quantized graph keeps
EXCLUDE_FLAGS: dict[str, Callable[[Sequence[str]], str]] = {
    "ort": lambda nodes: "nodes_to_exclude=" + ",".join(nodes),
    "openvino": lambda nodes: "ignored_scope=" + ",".join(nodes),
}
# How a user applies a plan with the backend's quantizer itself
APPLY = {
    "ort": "onnxruntime.quantization's quantize_static(..., nodes_to_exclude={nodes!r})",
    "openvino": "nncf.quantize(..., ignored_scope=nncf.IgnoredScope(names={nodes!r}))",
}
# ops a layer's kernel holds that are no layer of their own: the quantizer's inserted nodes
_NOT_LAYERS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
# a judged cell's statuses: the others ran nothing the plan can weigh (the backend failed or departs)
_JUDGED = (Status.PASS, Status.QUANTIZATION_LOSS)


@dataclass(frozen=True)
class Layer:
    """One quantized layer the plan can leave float: the nodes of the kernel that makes one quantized activation
    (a Conv with its Relu), and what the pure quantized model's readings said of it."""
    tensor: str
    nodes: tuple[str, ...]
    ops: tuple[str, ...]
    why: str


def plan_quantized(model: str, precision: str, backend: str, tolerance: float | None, shared: RunOptions) -> Plan:
    """The fewest layers to leave float so `model` quantized to `precision` by `backend`'s own quantizer meets the
    tolerance against float64 (the format's own tolerance by default), each trial a quant cell on the backend."""
    p = prec.quantized(precision)
    if backend not in EXCLUDE_FLAGS:
        raise UsageError(f"plan for a quantized format leaves layers float through the backend's own quantizer; "
                         f"{backend}'s is not driven that way here (backends: {', '.join(EXCLUDE_FLAGS)})")
    reg = shared.registry
    if not reg.cls(backend).implements("prepare_quantized"):
        raise UsageError(f"{backend} has no quantization path in fpdiff")
    t0 = time.perf_counter()
    grid = make_grid(model, reg, shared.grid(backends=(backend,), precisions=(prec.FP64,)))
    tol = tolerance if tolerance is not None else grid.source.tolerance.get(p.name, p.tolerance)
    plan = Plan(grid.source.ref.label, p.name, backend, tol, graph="")
    with QuantSession(grid, QuantOptions(schemes=(p.name,), backends=(backend,), layers=True), shared) as session:
        pure = session.cell(backend, p, layers=True)
        plan.evaluations = 1
        plan.pure_error, plan.pure_status, plan.pure_reason = _error(pure), _status(pure), pure.reason
        plan.trials.append(_trial([], pure, tol))
        if pure.status not in _JUDGED:
            plan.message = f"the pure {p.name} cell is {pure.status}: {pure.reason}"[:600]
            return _done(plan, t0)
        layers = ranked_layers(pure)
        plan.units, plan.graph = len(layers), graph_digest_of(layers)
        if plan.trials[0].passed:
            plan.passed, plan.error = True, plan.pure_error
            return _done(plan, t0)

        def evaluate(keep: Sequence[Layer]) -> Trial:
            nodes = sorted({n for layer in keep for n in layer.nodes})
            cell = session.cell(backend, p, flags=(EXCLUDE_FLAGS[backend](nodes),), layers=False)
            plan.evaluations += 1
            trial = _trial(nodes, cell, tol)
            plan.trials.append(trial)
            shared.step(f"{len(keep)} layers float", plan.evaluations, None)
            if cell.status == Status.MISMATCH:  # the backend departs: a plan cannot make it right
                raise _Departs(cell.reason)
            return trial
        try:
            found = search(layers, evaluate)
        except _Departs as e:
            plan.message = f"{backend} departs from the emulation of its own quantized model: {e}"[:600]
            return _done(plan, t0)
    if found is None:
        last = plan.trials[-1]
        best = min((t for t in plan.trials if t.status == Status.OK), key=lambda t: t.error)
        plan.message = (f"no plan short of leaving every quantized layer float: the most tried, {len(best.keep)} "
                        f"nodes float, still errs {best.error:.3g} (tolerance {tol:g})" +
                        (f"; with all {len(layers)} layers float: {last.status}: {last.reason}" if last.status !=
                         Status.OK else f"; with all {len(layers)} layers float: {last.error:.3g}"))[:600]
        return _done(plan, t0)
    keep, trial = found
    plan.passed, plan.error = True, trial.error
    plan.keep = [KeptOp(n, op, why=[layer.why]) for layer in keep for n, op in zip(layer.nodes, layer.ops)]
    plan.low_fraction = 1 - len(keep) / max(len(layers), 1)  # here: the share of quantized layers kept quantized
    plan.message = reproduce(plan, backend)
    return _done(plan, t0)


class _Departs(Exception):
    """A trial's cell is a mismatch: the backend computes something other than its own quantized model."""


def ranked_layers(cell: Cell) -> list[Layer]:
    """The pure cell's quantized activations as layers to leave float, likeliest to help first: those whose leaving
    float was measured to recover part of the output's loss, by that; then by what each one's own layer added to the
    drift (quant's readings). A layer is every node next to the activation in the quantized graph (the node that
    makes it and each node that reads its dequantized value): a quantizer leaves a tensor float only where no node
    around it is quantized. Nodes already in a better-ranked layer are not repeated."""
    import onnx

    from fpdiff.judging.quantized import hurting_layers
    rows = list(cell.info.get("layers") or [])
    graph = onnx.load(str(cell.info["quantized_graph"]), load_external_data=False).graph
    around = _neighbours(graph)
    out, seen = [], set()
    for r in hurting_layers(rows, top=len(rows)):
        near = [(op, name) for op, name in around.get(r["tensor"], []) if name not in seen]
        if not near:
            continue
        seen.update(name for _, name in near)
        said = (f"leaving {r['tensor']} float recovers {r['recovers']:.3g} of the loss" if r.get("recovers") else
                f"its layer adds {r['added']:.3g} drift to {r['tensor']}" if r.get("added") is not None else
                f"reads or makes {r['tensor']}")
        out.append(Layer(r["tensor"], tuple(n for _, n in near), tuple(op for op, _ in near), said))
    return out


def _neighbours(graph) -> dict[str, list[tuple[str, str]]]:
    """For each tensor a QuantizeLinear quantizes, the (op, name) of the named nodes that make it or read its
    dequantized value, the quantizer's own nodes left out."""
    made_by = {o: n for n in graph.node for o in n.output}
    readers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    found: dict[str, list[tuple[str, str]]] = {}
    for q in (n for n in graph.node if n.op_type == "QuantizeLinear"):
        t = q.input[0]
        near = [made_by[t]] if t in made_by else []
        for dq in (r for r in readers.get(q.output[0], []) if r.op_type == "DequantizeLinear"):
            near.extend(readers.get(dq.output[0], []))
        for n in near:
            if n.name and n.op_type not in _NOT_LAYERS and (n.op_type, n.name) not in found.setdefault(t, []):
                found[t].append((n.op_type, n.name))
    return found


def graph_digest_of(layers: Sequence[Layer]) -> str:
    """The layers' nodes as the plan's graph digest (a plan is never applied to another model)."""
    return graph_digest([Unit(n, op) for layer in layers for n, op in zip(layer.nodes, layer.ops)])


def search(layers: Sequence[Layer], evaluate: Callable[[Sequence[Layer]], Trial]
           ) -> tuple[list[Layer], Trial] | None:
    """The fewest layers, in rank order, whose leaving float passes: prefixes doubled until one passes, bisected
    down to the shortest that does, then each of its layers dropped where the rest passes without it (last ranked
    first). None: even every layer float fails."""
    lo, k = 0, 1  # the longest prefix known to fail, the prefix tried
    passing: tuple[int, Trial] | None = None
    while passing is None:
        k = min(k, len(layers))
        t = evaluate(layers[:k])
        if t.passed:
            passing = (k, t)
        elif k == len(layers):
            return None
        else:
            lo, k = k, 2 * k
    hi, best = passing
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t = evaluate(layers[:mid])
        if t.passed:
            hi, best = mid, t
        else:
            lo = mid
    keep = list(layers[:hi])
    for layer in reversed(list(keep)):
        if len(keep) == 1:
            break
        rest = [x for x in keep if x is not layer]
        t = evaluate(rest)
        if t.passed:
            keep, best = rest, t
    return keep, best


def reproduce(plan: Plan, backend: str) -> str:
    """How a user applies the plan with the backend's own quantizer, and re-verifies it with quant."""
    nodes = [k.node for k in plan.keep]
    flag = EXCLUDE_FLAGS[backend](nodes)
    return (f"apply: {APPLY[backend].format(nodes=nodes)}; re-verify: fpdiff quant {plan.model} --schemes "
            f"{plan.precision} --backends {backend} --backend-flag {backend}={flag}")


def _trial(nodes: Sequence[str], cell: Cell, tol: float) -> Trial:
    err = _error(cell)
    return Trial(list(nodes), err, cell.status in _JUDGED and err <= tol, status=_status(cell),
                 seconds=float(cell.duration_s or 0.0), reason="" if cell.status in _JUDGED else cell.reason[:300])


def _error(cell: Cell) -> float:
    """The cell's backend output against float64 (inf: it did not run)."""
    v = (cell.metrics or {}).get("rel_l2")
    return float(v) if v is not None else float("inf")


def _status(cell: Cell) -> Status:
    return Status.OK if cell.status in _JUDGED else cell.status


def _done(plan: Plan, t0: float) -> Plan:
    plan.seconds = round(time.perf_counter() - t0, 3)
    return plan
