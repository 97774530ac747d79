"""A quantized model's plan: the fewest layers its backend's quantizer leaves in float so the quantized model meets
the tolerance against float64 on inputs calibration never saw. The search is ordered by where the format costs (each
quantized layer's drift against the float model and what leaving it float recovers, both from the exact emulation
of the backend's own quantized model: quant's per-layer readings), and every trial is verified where it ships: the
backend's own quantizer quantizes the model again with those layers excluded, its runtime runs it, and the cell is
judged as quant judges one (a backend that departs from its emulation is a mismatch no plan can fix)."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fpdiff.analysis.options import RunOptions
from fpdiff.analysis.plan import quantized_export
from fpdiff.analysis.plan.search import KeptOp, Plan, Trial, Unit, graph_digest
from fpdiff.analysis.quant import QuantOptions, QuantSession
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import make_grid
from fpdiff.onnxtools.nncf_graph import NNCF_QUANTIZERS

# The backends whose quantizer takes a list of nodes to leave float, and how a cell asks for it (the backend flag the
# user would pass to quant): ONNX Runtime's nodes_to_exclude (nodes of its pre-processed float graph), NNCF's
# IgnoredScope names (nodes of the fp32 ONNX graph it quantizes), each by the names its quantized graph keeps
EXCLUDE_FLAGS: dict[str, Callable[[Sequence[str]], str]] = {
    "ort": lambda nodes: "nodes_to_exclude=" + ",".join(nodes),
    "openvino": lambda nodes: "ignored_scope=" + ",".join(nodes),
    "litert": lambda nodes: "no_quantize=" + ",".join(nodes),
    "iree": lambda nodes: "nodes_to_exclude=" + ",".join(nodes),  # ONNX Runtime's quantizer makes IREE's graph
    # PT2E quantizers leave modules float by their module filter: a layer is the modules its nodes came from
    "executorch": lambda modules: "float_modules=" + ",".join(modules),
    "inductor": lambda modules: "float_modules=" + ",".join(modules),
}
PT2E = frozenset({"executorch", "inductor"})
# the mixed schemes a backend's quantizer makes: the backup a plan's layers take there, and how a cell asks for it
BACKUP_FLAGS: dict[tuple[str, str, str], Callable[[Sequence[str]], str]] = {
    ("ort", "int4-weight", "int8"): lambda nodes: "nodes_at_8_bits=" + ",".join(nodes),
    ("litert", "int4-weight", "int8"): lambda nodes: "nodes_at_8_bits=" + ",".join(nodes),
}
BACKUPS = ("float", "int8")
# the formats whose cells the backend's flag reaches: OpenVINO's int8-dynamic cell is ONNX Runtime's dynamic graph
EXCLUDES_IN = {"openvino": tuple(NNCF_QUANTIZERS), "litert": ("int8-dynamic", "int4-weight"),
               "executorch": ("int8",), "inductor": ("int8",)}
EXCLUDES_WHY = {"openvino": "NNCF does not make int8-dynamic; OpenVINO runs ONNX Runtime's dynamic graph",
                "litert": "its int8 is litert-torch's PT2EQuantizer, whose module filters fpdiff does not drive yet; "
                          "ai-edge-quantizer's recipes make its int8-dynamic and int4-weight",
                "executorch": "a PT2E int8-dynamic program has no float graph to rank its weights by here",
                "inductor": "a PT2E int8-dynamic program has no float graph to rank its weights by here"}
# How a user applies a plan with the backend's quantizer itself, by format (the call fpdiff's cell makes)
APPLY = {
    "ort": {"int8": "onnxruntime.quantization's quantize_static(..., nodes_to_exclude={nodes!r})",
            "fp8": "onnxruntime.quantization's quantize_static(..., nodes_to_exclude={nodes!r})",
            "int8-dynamic": "onnxruntime.quantization's quantize_dynamic(..., nodes_to_exclude={nodes!r})",
            "int4-weight": "onnxruntime.quantization's MatMulNBitsQuantizer(..., nodes_to_exclude={nodes!r})"},
    "iree": {f: "onnxruntime.quantization's " + call + "(..., nodes_to_exclude={nodes!r}), the graph IREE compiles"
             for f, call in (("int8", "quantize_static"), ("fp8", "quantize_static"),
                             ("int8-dynamic", "quantize_dynamic"), ("int4-weight", "MatMulNBitsQuantizer"))},
    "executorch": {"int8": "XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)), "
                           "then set_filter_function(lambda n: not any(get_module_name_filter(name)(n) for name in "
                           "{nodes!r})), before prepare_pt2e"},
    "inductor": {"int8": "X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config()), then "
                         "set_module_name_qconfig(name, None) for each name in {nodes!r}, before prepare_pt2e"},
    "openvino": {"int8": "nncf.quantize(..., ignored_scope=nncf.IgnoredScope(names={nodes!r}))",
                 "fp8": "nncf.quantize(..., ignored_scope=nncf.IgnoredScope(names={nodes!r}))",
                 "int4-weight": "nncf.compress_weights(..., ignored_scope=nncf.IgnoredScope(names={nodes!r}))"},
    "litert": {f: "ai-edge-quantizer's Quantizer: load_quantization_recipe(recipe." + r + "()), then for each op in "
               "{nodes!r} update_quantization_recipe(regex='^' + re.escape(op) + ';', operation_name='*', "
               "algorithm_key='no_quantize')" for f, r in (("int8-dynamic", "dynamic_wi8_afp32"),
                                                           ("int4-weight", "weight_only_wi4_afp32"))},
}
APPLY_BACKUP = {
    ("ort", "int4-weight", "int8"): "onnxruntime.quantization's MatMulNBitsQuantizer(..., bits=4, nodes_to_exclude="
                                    "{nodes!r}), then MatMulNBitsQuantizer(..., bits=8, nodes_to_exclude=every node "
                                    "but those) on its output",
    ("litert", "int4-weight", "int8"): "ai-edge-quantizer's Quantizer: load_quantization_recipe(recipe."
                                       "weight_only_wi4_afp32()), then for each op in {nodes!r} "
                                       "add_weight_only_config(regex='^' + re.escape(op) + ';', operation_name='*', "
                                       "num_bits=8)",
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


def plan_quantized(model: str, precision: str, backend: str, tolerance: float | None, shared: RunOptions,
                   backup: str = "float", exports: Mapping[str, str] | None = None, load: Plan | None = None) -> Plan:
    """The fewest layers to leave float (`backup`: or to quantize at 8 bits in an int4-weight model) so `model`
    quantized to `precision` by `backend`'s own quantizer meets the tolerance against float64 (the format's own
    tolerance by default), each trial a quant cell on the backend. `load`: a saved plan re-verified instead of
    searched; `exports`: {target: path}, the verified plan's quantized file and settings written and judged again."""
    p = prec.quantized(precision)
    if backend not in EXCLUDE_FLAGS:
        raise UsageError(f"plan for a quantized format leaves layers float through the backend's own quantizer; "
                         f"{backend}'s is not driven that way here (backends: {', '.join(EXCLUDE_FLAGS)})")
    reg = shared.registry
    if not reg.cls(backend).implements("prepare_quantized"):
        raise UsageError(f"{backend} has no quantization path in fpdiff")
    if p.name not in EXCLUDES_IN.get(backend, prec.QUANTIZED):
        raise UsageError(f"{backend}'s {p.name} cell is not made by a quantizer that leaves layers float here "
                         f"({EXCLUDES_WHY[backend]})")
    flag = _backup_flag(backend, p, backup)
    wanted = quantized_export.requested(backend, exports or {})
    if load is not None and (load.precision, load.backend, load.backup or "float") != (p.name, backend, backup):
        raise UsageError(f"the saved plan is for {load.precision} on {load.backend} with --backup "
                         f"{load.backup or 'float'}, not {p.name} on {backend} with --backup {backup}")
    t0 = time.perf_counter()
    grid = make_grid(model, reg, shared.grid(backends=(backend,), precisions=(prec.FP64,)))
    tol = tolerance if tolerance is not None else grid.source.tolerance.get(p.name, p.tolerance)
    plan = Plan(grid.source.ref.label, p.name, backend, tol, graph="", backup=backup)
    with QuantSession(grid, QuantOptions(schemes=(p.name,), backends=(backend,), layers=load is None),
                      shared) as session:
        cells: dict[frozenset[str], Cell] = {}

        def evaluate_nodes(nodes: Sequence[str]) -> Trial:
            cell = session.cell(backend, p, flags=(flag(nodes),) if nodes else (), layers=False)
            cells[frozenset(nodes)] = cell
            plan.evaluations += 1
            trial = _trial(nodes, cell, tol)
            plan.trials.append(trial)
            shared.step(f"{len(nodes)} nodes {'float' if backup == 'float' else 'at ' + backup}", plan.evaluations,
                        None)
            if cell.status == Status.MISMATCH:  # the backend departs: a plan cannot make it right
                raise _Departs(cell.reason)
            return trial
        try:
            if load is not None:
                _reverified(plan, load, evaluate_nodes, flag)
            else:
                _searched(plan, session, p, backend, flag, evaluate_nodes)
        except _Departs as e:
            plan.passed, plan.error = False, None
            plan.message = f"{backend} departs from the emulation of its own quantized model: {e}"[:600]
            return _done(plan, t0)
        if wanted and plan.passed:
            final = cells.get(frozenset(plan.kept)) or session.cell(backend, p, flags=(
                (flag(sorted(plan.kept)),) if plan.kept else ()), layers=False)
            settings = {"backend": backend, "format": p.name, "backup": backup, "quantized_by":
                        final.info.get("quantized_by"), "flag": flag(sorted(plan.kept)) if plan.kept else None,
                        "apply": plan.message.split("; re-verify:")[0].removeprefix("apply: ") if plan.kept else
                        "the quantizer's own call, nothing left out", "tolerance": tol, "error": plan.error}
            plan.exports = quantized_export.write_all(plan, final, wanted, settings,
                                                      lambda path: session.cell(backend, p, artifact=path))
    return _done(plan, t0)


def _reverified(plan: Plan, load: Plan, evaluate: Callable[[Sequence[str]], Trial],
                flag: Callable[[Sequence[str]], str]) -> None:
    """A saved plan run again: its nodes handed to the quantizer, the cell judged against the tolerance."""
    nodes = sorted(load.kept)
    trial = evaluate(nodes)
    if not nodes:  # an empty plan: its one cell is the pure one
        plan.pure_error, plan.pure_status, plan.pure_reason = trial.error, trial.status, trial.reason
    plan.keep, plan.units, plan.graph = list(load.keep), load.units, load.graph
    plan.passed, plan.error = trial.passed, trial.error
    plan.low_fraction = load.low_fraction
    plan.message = (reproduce(plan, plan.backend, flag) if trial.passed else
                    f"the saved plan no longer meets the tolerance: {trial.status}"
                    f"{f': {trial.reason}' if trial.reason else f', error {trial.error:.3g}'}")[:900]


def _searched(plan: Plan, session: QuantSession, p: prec.Precision, backend: str,
              flag: Callable[[Sequence[str]], str], evaluate_nodes: Callable[[Sequence[str]], Trial]) -> None:
    """The search: the pure cell, its layers ranked, then the fewest whose leaving float (or at the backup) passes."""
    pure = session.cell(backend, p, layers=True)
    plan.evaluations = 1
    tol = plan.tolerance
    plan.pure_error, plan.pure_status, plan.pure_reason = _error(pure), _status(pure), pure.reason
    plan.trials.append(_trial([], pure, tol))
    if pure.status not in _JUDGED:
        plan.message = f"the pure {p.name} cell is {pure.status}: {pure.reason}"[:600]
        return
    layers = ranked_layers(pure) if _static(p) else ranked_weights(pure, session)
    if backend in PT2E:
        layers = by_module(layers, str(pure.info["quantized_graph"]))
    plan.units, plan.graph = len(layers), graph_digest_of(layers)
    if plan.trials[0].passed:
        plan.passed, plan.error = True, plan.pure_error
        return
    if not layers:
        plan.message = (f"no plan: the quantized graph has no layer {backend}'s quantizer can leave float "
                        f"(no quantized {'activation' if _static(p) else 'weight'} fpdiff matched to the float "
                        "graph)")
        return
    def on_backend(keep: Sequence[Layer]) -> Trial:
        return evaluate_nodes(sorted({n for layer in keep for n in layer.nodes}))
    found = None
    if _static(p) and plan.backup in ("", "float") and backend not in PT2E:
        found = _verified_screen(plan, pure, session, layers, on_backend)
    if found is None:
        found = search(layers, on_backend, whole=plan.backup not in ("", "float"))
    if found is None:
        tried = [t for t in plan.trials[1:] if t.status == Status.OK]
        most = max(tried, key=lambda t: len(t.keep), default=None)
        every = plan.backup not in ("", "float")
        plan.message = (("no plan even with every layer at " + plan.backup if every else
                         "no plan short of leaving every quantized layer float") + (
            f": with {len(most.keep)} nodes {'at ' + plan.backup if every else 'float'} (the most tried, of "
            f"{len(layers)} layers) it still errs "
            f"{most.error:.3g} (tolerance {tol:g})" if most is not None else
            f": it has {len(layers)} quantized layer{'s' * (len(layers) != 1)}"))[:600]
        return
    keep, trial = found
    plan.passed, plan.error = True, trial.error
    plan.keep = [KeptOp(n, op, why=[layer.why]) for layer in keep for n, op in zip(layer.nodes, layer.ops)]
    plan.low_fraction = 1 - len(keep) / max(len(layers), 1)  # here: the share of quantized layers kept quantized
    plan.message = reproduce(plan, backend, flag)


# The search screened first on the pure cell's own exact emulation: each trial leaves its layers float in the
# float64 emulation of the quantized graph the backend ran (every quantized activation their nodes read or make: their
# QuantizeLinear and DequantizeLinear give the value back) instead of quantizing, compiling and running the model on
# the backend again. The set it finds is verified on the backend, then each of its layers dropped where the backend
# still passes without it; only a set the backend fails sends the search to the backend. Sound because every cell
# the plan trusts is the backend's: the screen only orders and shortens. Measured on Gemma 2 at int8 on OpenVINO: at
# SCREEN_MARGIN 1.0 the screened set failed on the backend (the search then cost 20 evaluations); at 0.8 it passed
# with 7 layers, which the drops bring down. Not on PT2E quantizers: a module left float there still has its input
# quantized where the module reading it is quantized (ExecuTorch's screen passed fc1 alone, the backend needed fc1
# and fc2), so its screen would not hold.
SCREEN_MARGIN = 0.8  # a screened set passes below this share of the tolerance: room for the backend's own rounding


def _verified_screen(plan: Plan, pure: Cell, session: QuantSession, layers: Sequence[Layer],
                     on_backend: Callable[[Sequence[Layer]], Trial]) -> tuple[list[Layer], Trial] | None:
    """The screened set verified on the backend and each of its layers then dropped where the backend still passes
    without it (the screen's margin and its narrower float leave more layers float than the backend needs):
    (its layers, the backend's trial); None where the screened set fails there (the search then runs on the
    backend, as without a screen)."""
    screened = _screened(pure, session, layers, plan.tolerance * SCREEN_MARGIN)
    if screened is None:
        return None
    keep, runs = screened
    plan.screened = runs
    trial = on_backend(keep)
    said = "which it passes" if trial.passed else "which it fails: searched on the backend"
    plan.analyses.append(f"screened on the exact emulation: {runs} trials, {len(keep)} of {len(layers)} layers "
                         f"float below {SCREEN_MARGIN:g}x the tolerance, verified on {plan.backend}, {said}")
    return dropped(keep, trial, on_backend) if trial.passed else None


def _screened(pure: Cell, session: QuantSession, layers: Sequence[Layer], bound: float
              ) -> tuple[list[Layer], int] | None:
    """The search's fewest layers run on the pure cell's emulation, each trial its layers' activations bypassed and
    judged against float64 at `bound`; with how many trials. None where the emulation cannot run or nothing short
    of every layer passes it."""
    import onnx

    from fpdiff.judging.quantized import rel_l2
    from fpdiff.onnxtools.emulate import emulate
    graph, truth = pure.info.get("quantized_graph"), session.truth
    if not graph or truth is None:
        return None
    runs = 0
    try:
        m = onnx.load(str(graph))
        feeds = session.feeds(m)
        touching = _touching(m.graph)

        def emulated(keep: Sequence[Layer]) -> Trial:
            nonlocal runs
            runs += 1
            left = {x.tensor for x in keep} | {t for x in keep for n in x.nodes for t in touching.get(n, ())}
            err = rel_l2(emulate(m, feeds, bypass=frozenset(left)).outputs, truth)
            return Trial([x.tensor for x in keep], err, err <= bound)
        found = search(layers, emulated)
    except Exception:  # noqa: BLE001 - the screen only shortens the search; the backend's search stands without it
        return None
    return (found[0], runs) if found is not None else None


def _touching(graph) -> dict[str, set[str]]:
    """Each node's quantized activations, by the float tensor its QuantizeLinear reads: those it reads through a
    DequantizeLinear and those it makes: what the quantizer leaves float around a node it excludes."""
    made_by = {o: n for n in graph.node for o in n.output}
    read_by: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            read_by.setdefault(i, []).append(n)
    out: dict[str, set[str]] = {}
    for n in graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        mine = out.setdefault(n.name, set())
        for i in n.input:
            dq = made_by.get(i)
            q = made_by.get(dq.input[0]) if dq is not None and dq.op_type == "DequantizeLinear" else None
            if q is not None and q.op_type == "QuantizeLinear":
                mine.add(q.input[0])
        mine.update(o for o in n.output if any(r.op_type == "QuantizeLinear" for r in read_by.get(o, ())))
    return out


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


def by_module(layers: Sequence[Layer], graph_path: str) -> list[Layer]:
    """The layers as a PT2E quantizer's module filter takes them: each the modules its nodes came from (the QDQ
    graph's record, model/pt2e.py), a node of the model's root module (a functional ReLU) by the modules of the
    nodes that feed it (the quantizer annotates it with them: leaving them float leaves it float), in rank order, a
    module in its best-ranked layer only."""
    import json

    import onnx

    from fpdiff.model.pt2e import MODULES_KEY
    m = onnx.load(graph_path, load_external_data=False)
    paths = json.loads({p.key: p.value for p in m.metadata_props}.get(MODULES_KEY, "{}"))
    nodes = {n.name: n for n in m.graph.node}
    made_by = {o: n for n in m.graph.node for o in n.output}

    def module_of(name: str, depth: int = 0) -> list[str]:
        n = nodes.get(name)
        if n is None or depth > _UPSTREAM:
            return []
        fx = next((p.value.split(" ", 1)[0].lstrip("%") for p in n.metadata_props if p.key == "pkg.torch.onnx.fx_node"),
                  "")
        if paths.get(fx):
            return [paths[fx]]
        return [x for i in n.input if i in made_by for x in module_of(made_by[i].name, depth + 1)]
    out, seen = [], set()
    for layer in layers:
        modules = [x for x in dict.fromkeys(p for n in layer.nodes for p in module_of(n)) if x not in seen]
        if modules:
            seen.update(modules)
            out.append(Layer(layer.tensor, tuple(modules), ("module",) * len(modules), layer.why))
    return out


# how far up from a root-module node (a functional op) its feeding modules are looked for
_UPSTREAM = 3


def _static(p: prec.Precision) -> bool:
    """A format whose activations are quantized with calibrated scales: its layers are its quantized activations
    (else its quantized weights)."""
    return p.scheme is not None and "calibrated" in p.scheme.activation_granularity


def ranked_weights(cell: Cell, session: QuantSession) -> list[Layer]:
    """A weight-quantized cell's layers (int8-dynamic, int4-weight): each weight its quantizer stored in integers,
    as the float graph's nodes that compute with it, most costly first: what that weight alone, dequantized as the
    quantized graph holds it, costs at the outputs (the float graph in float64). The activations a dynamic-range
    kernel quantizes at run time follow one rule everywhere and are left to the verification."""
    import onnx

    from fpdiff.onnxtools.weights import quantized_weights, weight_costs
    if not cell.info.get("float_graph"):
        return []
    float_graph = onnx.load(str(cell.info["float_graph"]))
    weights = quantized_weights(onnx.load(str(cell.info["quantized_graph"])), float_graph)
    cost = weight_costs(float_graph, session.feeds(float_graph), weights)
    out, seen = [], set()
    for w in sorted(weights, key=lambda w: -cost[w.weight]):
        near = [(op, n) for n, op in zip(w.nodes, w.ops) if n not in seen]
        if near:
            seen.update(n for _, n in near)
            out.append(Layer(w.weight, tuple(n for _, n in near), tuple(op for op, _ in near),
                             f"its weight {w.weight} quantized alone costs {cost[w.weight]:.3g} at the outputs"))
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


def search(layers: Sequence[Layer], evaluate: Callable[[Sequence[Layer]], Trial], whole: bool = False
           ) -> tuple[list[Layer], Trial] | None:
    """The fewest layers, in rank order, whose leaving float passes: prefixes doubled until one passes, bisected
    down to the shortest that does, then each of its layers dropped where the rest passes without it (last ranked
    first). Every layer float is the float model, never a plan: None when all but the last still fail. `whole`:
    every layer may be taken (at a backup format, all of them is still a quantized model)."""
    top = len(layers) if whole else len(layers) - 1  # the longest prefix that still quantizes something
    lo, k = 0, 1  # the longest prefix known to fail, the prefix tried
    passing: tuple[int, Trial] | None = None
    while passing is None:
        k = min(k, top)
        if k <= lo:
            return None
        t = evaluate(layers[:k])
        if t.passed:
            passing = (k, t)
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
    return dropped(list(layers[:hi]), best, evaluate)


def dropped(keep: list[Layer], best: Trial, evaluate: Callable[[Sequence[Layer]], Trial]
            ) -> tuple[list[Layer], Trial]:
    """A passing set with each of its layers dropped where the rest still passes, the last ranked first."""
    for layer in reversed(list(keep)):
        if len(keep) == 1:
            break
        rest = [x for x in keep if x is not layer]
        t = evaluate(rest)
        if t.passed:
            keep, best = rest, t
    return keep, best


def _backup_flag(backend: str, p: prec.Precision, backup: str) -> Callable[[Sequence[str]], str]:
    """The backend flag a trial takes for its layers: left float, or at the backup format where the backend's
    quantizer makes that mix; one line where it does not."""
    if backup not in BACKUPS:
        raise UsageError(f"--backup is float or int8, not {backup!r}")
    if backup == "float":
        return EXCLUDE_FLAGS[backend]
    mixed = BACKUP_FLAGS.get((backend, p.name, backup))
    if mixed is None:
        offered = ", ".join(f"{f} with {b} on {be}" for be, f, b in BACKUP_FLAGS)
        raise UsageError(f"--backup {backup}: {backend}'s quantizer is not driven to mix {p.name} with {backup} here "
                         f"(mixes: {offered}; NNCF picks its own int8 layers by its ratio, not by name)")
    return mixed


def reproduce(plan: Plan, backend: str, flag_of: Callable[[Sequence[str]], str]) -> str:
    """How a user applies the plan with the backend's own quantizer, and re-verifies it with quant."""
    nodes = [k.node for k in plan.keep]
    flag = flag_of(nodes)
    how = APPLY_BACKUP.get((backend, plan.precision, plan.backup)) or APPLY[backend][plan.precision]
    return (f"apply: {how.format(nodes=nodes)}; re-verify: fpdiff quant {plan.model} --schemes "
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
