"""plan for ONNX models: evidence from the float64 reference run's ranges, trials of mixed graphs on the named
backend."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from fpdiff.analysis.plan.jobs import Jobs, ProgramTrials
from fpdiff.analysis.plan.search import PRIOR, Plan, Progress, Search, Unit, finish, graph_digest, settle
from fpdiff.analysis.ranges import dtype_range, onnx_overflows, scalar_reasons
from fpdiff.core import precision as prec
from fpdiff.onnxtools.dtypes import CLAMP_MAX_SIZE, clamp_into
from fpdiff.onnxtools.graph import DATA_MOVEMENT, PASS_THROUGH, float64_values
from fpdiff.onnxtools.mixed import named

# A pseudo-op the search can "keep": small float constants the format cannot hold (a -3.4e38 mask fill, an eps of
# 1e-8) replaced by the format's nearest nonzero finite value, as onnxconverter-common and coremltools do by
# default. fpdiff does it only as a named, verified plan entry, never silently; the judge stays the original model.
# Only the copies read by ops computing in the low type move (to_mixed's clamp): a kept op reads the model's own
# value, so the plan's every-op-in-fp32 bound is the model's own fp32 numbers.
CLAMP = "clamp-constants"


def clamp_constants(model, low: int) -> list[str]:
    """What clamping may move: each small stored float constant `low` cannot hold (onnxtools.dtypes), old -> new;
    a trial moves only the copies its ops computing in `low` read."""
    from onnx import numpy_helper

    from fpdiff.onnxtools.mixed import const_value, is_float_constant
    stored = [(t.name, numpy_helper.to_array(t)) for t in model.graph.initializer]
    stored += [(n.output[0], const_value(n)) for n in model.graph.node if is_float_constant(n)]
    changes: list[str] = []
    for name, a in stored:
        new = clamp_into(a, low)
        if new is a:
            continue
        changes += [f"{name}: {old:.3g} -> {nv:.3g}" for old, nv in zip(a.reshape(-1).astype(np.float64),
                                                                         new.reshape(-1).astype(np.float64))
                    if old != nv]
    return list(dict.fromkeys(changes))


def unit_names(model, values: dict) -> list[str]:
    """Nodes a plan can keep in fp32: those computing floats, not moving them. An If, Loop or Scan is one unit: kept,
    its subgraphs compute whole in fp32; not kept, in the low type, as the check's cast cell computes them (nodes
    inside a subgraph are no units of their own: the float64 run's values stop at the top graph)."""
    return [n.name for n in model.graph.node
            if n.op_type not in DATA_MOVEMENT
            and any(isinstance(values.get(o), np.ndarray) and values[o].dtype.kind == "f" for o in n.output)]


def _flops(node, values: dict) -> float:
    outs = [values[o] for o in node.output if o in values and isinstance(values[o], np.ndarray)]
    numel = float(sum(o.size for o in outs))
    ins = [values.get(i) for i in node.input]
    if node.op_type in ("MatMul", "Gemm") and len(ins) > 1 and isinstance(ins[0], np.ndarray) and ins[0].ndim:
        return 2.0 * numel * ins[0].shape[-1]
    if node.op_type == "Conv" and len(ins) > 1 and isinstance(ins[1], np.ndarray):
        return 2.0 * numel * float(np.prod(ins[1].shape[1:]))
    return numel


def float64_run(model, feeds: dict) -> dict:
    """Every value of the graph in float64 (the judge's run), weights included."""
    from onnx import numpy_helper

    from fpdiff.onnxtools.export import ONNX_TYPE, cast_model
    values = float64_values(model, feeds)
    values.update({t.name: numpy_helper.to_array(t) for t in cast_model(model, ONNX_TYPE["float64"]).graph.initializer})
    return values


def evidence(model, values: dict, p: prec.Precision,
             names: list[str]) -> tuple[list[str], list[str], list[str], dict]:
    """Ranked candidates: nodes whose float64 outputs or float constants the format cannot hold (strong),
    nodes with range notes, then the field's prior (ops autocast keeps in fp32), then graph order."""
    import torch

    dt = p.dtype  # fp16 or bf16: the plan was asked of a whole-model low precision
    why: dict[str, list[str]] = {}
    noted: list[str] = []
    inits = _constants(model)
    valid = set(names)
    for n in model.graph.node:
        if n.name not in valid:
            continue
        for o in n.output:
            v = values.get(o)
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size:
                r = dtype_range(torch.from_numpy(np.asarray(v, dtype=np.float64)).reshape(-1), dt, p.name, None)
                why.setdefault(n.name, []).extend(f"ranges: {x}" for x in r.risks)
                if r.notes:
                    noted.append(n.name)
        for i in n.input:
            v = values.get(i)
            if i in inits and isinstance(v, np.ndarray) and v.dtype.kind == "f" and 0 < v.size <= CLAMP_MAX_SIZE:
                for x in v.reshape(-1):
                    for reason in scalar_reasons(float(x), [p]).get(p.name, []):
                        why.setdefault(n.name, []).append(f"constant {i}: {reason}")
    why = {k: list(dict.fromkeys(v)) for k, v in why.items() if v}
    strong = [n for n in names if n in why]
    ops = {n.name: n.op_type for n in model.graph.node}
    prior = [n for n in names if ops[n] in PRIOR]
    return list(dict.fromkeys(strong + noted + prior + names)), strong, _sources(model, why, inits), why


def _constants(model) -> set[str]:
    """Names of the graph's stored values: initializers and Constant nodes' outputs."""
    return {t.name for t in model.graph.initializer} | {o for n in model.graph.node if n.op_type == "Constant"
                                                        for o in n.output}


def _sources(model, why: dict, consts: set[str]) -> list[str]:
    """Nodes where a problem starts: a constant the format cannot hold, or a risky output made from inputs
    without risk (an Add of an already-overflowed tensor only inherits)."""
    risky_out = {o for n in model.graph.node if n.name in why for o in n.output}
    out = []
    for n in model.graph.node:
        if n.name not in why:
            continue
        if any(w.startswith("constant ") for w in why[n.name]):
            out.append(n.name)
        elif not any(i in risky_out for i in n.input if i not in consts):
            out.append(n.name)
    return out


def follow_moves(model, keep) -> set[str]:
    """Nodes that only move values take the type of what they move: fp32 when their data input comes from a kept
    node (else a kept op's output would be rounded on its way through a Transpose)."""
    out = set(keep)
    fp32 = {o for n in model.graph.node if n.name in out for o in n.output}
    for n in model.graph.node:
        if n.op_type in PASS_THROUGH and n.input and n.input[0] in fp32:
            out.add(n.name)
            fp32.update(n.output)
    # moves of weights and graph inputs (a Transpose of an initializer) take the type of the ops that read them
    consts = _constants(model) | {i.name for i in model.graph.input}
    readers: dict[str, list[str]] = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n.name)
    for n in reversed(model.graph.node):
        if n.op_type in PASS_THROUGH and n.input and n.input[0] in consts:
            users = [u for o in n.output for u in readers.get(o, [])]
            if users and all(u in out for u in users):
                out.add(n.name)
    return out


class OnnxTrials(ProgramTrials):
    """A keep-set as a mixed ONNX graph (.onnx), run as written on the plan's backend in a worker."""
    suffix = ".onnx"

    def __init__(self, jobs: Jobs, backend: str, model, feeds: dict, expected: list, p: prec.Precision,
                 tolerance: float, units: list[str]) -> None:
        from fpdiff.onnxtools.export import ONNX_TYPE
        super().__init__(jobs, backend, list(feeds.values()), list(feeds), expected, tolerance, units)
        self.model = model
        self.low = ONNX_TYPE[prec.dtype_name(p.dtype)]
        self.clamped = clamp_constants(model, self.low)  # what `clamp-constants` may move

    def build(self, keep) -> object:
        from fpdiff.onnxtools.mixed import to_mixed
        return to_mixed(self.model, self.low, follow_moves(self.model, set(keep) - {CLAMP}), clamp=CLAMP in keep)

    def write(self, keep: frozenset[str], path: Path) -> None:
        import onnx
        onnx.save(self.build(keep), str(path))

    def export_onnx(self, keep, path: Path) -> None:
        import shutil
        shutil.copyfile(self.program(keep), path)


def plan_onnx(source, p: prec.Precision, *, jobs: Jobs, backend: str, tolerance: float,
              load: Plan | None, progress: Progress | None = None) -> tuple[Plan, OnnxTrials]:
    """Search (or re-verify a loaded plan) over the ONNX graph's nodes, with trials on `backend`; the trials hold
    the planned graphs for the speed figure and the export."""
    t0 = time.perf_counter()
    feeds = dict(zip(source.input_names, source.inputs))
    model = source.module
    if prec.dtype_name(p.dtype) == "bfloat16":  # the graph check's bf16 cells cast: at opset 22, or the model's
        from fpdiff.sources.opset import for_bfloat16  # own where that conversion fails (sources/opset.py)
        model = for_bfloat16(model, feeds)[0]
    model = named(model)
    values = float64_run(model, feeds)
    expected = [np.asarray(values[o.name], dtype=np.float64) for o in model.graph.output]
    names = unit_names(model, values)
    nodes = {n.name: n for n in model.graph.node}
    units = [Unit(n, nodes[n].op_type, "", "", _flops(nodes[n], values)) for n in names]
    trials = OnnxTrials(jobs, backend, model, feeds, expected, p, tolerance, names)
    if trials.clamped:
        units.append(Unit(CLAMP, "clamp constants"))
    plan = Plan(source.ref.label, p.name, backend, tolerance, graph_digest(units), units=len(units))
    search = Search(units, trials, tolerance, progress)

    def gather():
        ranked, strong, sources, why = evidence(model, values, p, names)
        if trials.clamped:  # the cheapest remedy first: no op in fp32, the lost constants moved into range
            why[CLAMP] = [f"constant {c}" for c in trials.clamped]
            sources, strong, ranked = [CLAMP], list(dict.fromkeys(sources + strong)), ranked + [CLAMP]
        forced = onnx_overflows(model, feeds, values, p, names)  # what the value ranges forbid the low type
        return ranked, strong, sources, why, ["ranges (the float64 reference run's values)"], None, forced
    found, why = settle(plan, search, load, source.ref.label, gather)
    return finish(plan, search, found, why, t0), trials
