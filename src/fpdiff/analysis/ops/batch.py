"""Many one-op cases as one program: cases of one kind (torch cases together, ONNX cases of one opset together) are
written as one model whose outputs are every case's outputs side by side, each op on its own inputs, so a program
of N cases costs one export and compile per backend and precision instead of N. The program runs through check's
own steps (its grid, reference, baselines); each case is then judged by check's own rules on its own outputs alone
(its slice of every job's outputs: check measures a model's outputs together, so a case's verdict must not be
diluted by its neighbours'). A case's cell is kept only when that judgement is a pass; every other cell is the
verdict of the case run alone (sweep.run_case): a case whose own outputs fail in a program that ran is rerun alone
at once, and a program that fails as a whole at a backend and precision (an export, a compile, a run: there are no
outputs to tell the cases apart) is split in halves and rerun until the failing case stands alone. So every
non-pass verdict is exact, and a pass is only ever a case's own outputs passing.

What a program's job records about the whole program rather than one op (the float ops counted by dtype, a
compiler's word on its whole graph) is the program's on each of its passing cells: a dtype-changed finding is the
program's share rule, and a support state is the case's own only where the runtime names ops (ONNX Runtime names the
case's op types) or every op it names is in the same state; a case whose state cannot be told apart is run alone."""
from __future__ import annotations

import dataclasses
import hashlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.utils import _pytree as pytree

from fpdiff.analysis.ops import quantized, verdict
from fpdiff.analysis.ops.case import ONNX_CATALOG, TORCH_CATALOG, Case, OnnxSample, OpsCell, TorchSample
from fpdiff.analysis.ops.sweep import CaseOutcome, SweepConfig, ops_cell, safe_name
from fpdiff.analysis.ops.sweep import run_case as run_float_case
from fpdiff.backends import registry
from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.errors import ReferenceFailed, UsageError
from fpdiff.core.status import Status
from fpdiff.core.support import STATES, Support
from fpdiff.core.task import ONNX, TORCH
from fpdiff.judging import evidence
from fpdiff.judging.cells import first_verdicts
from fpdiff.judging.grid import CellKey, Grid, make_grid
from fpdiff.judging.judge import cross_check
from fpdiff.judging.rejudge import CHECK_RULES, judge_run
from fpdiff.judging.rules import Evidence
from fpdiff.judging.run import run_grid, worker_env
from fpdiff.model.graph import STATIC
from fpdiff.runtime import external, rundir
from fpdiff.runtime.worker import JobResult

# Cases per program: 8 share one export and compile per backend and precision, while a program that fails as a
# whole costs at most 2 * log2(8) = 6 more programs to find its failing case; the sweep's batch (the unit Ray
# schedules) is as large at least, so a program is never cut by a batch boundary.
PROGRAM_SIZE = 8
# ONNX op types a runtime's support record leaves out (ort.py's _CASTS): not the case's op
_CASTS = {"Cast", "CastLike"}

Pair = tuple[str, str]  # (backend, precision): the cells of one case a program judges


@dataclass
class Found:
    """What is known of one case so far: its kept cells by (backend, precision), its repros' requests, the catalog's
    second opinion, why it could not be judged, and how much program time it took."""
    cells: dict[Pair, OpsCell] = field(default_factory=dict)
    requests: list = field(default_factory=list)
    disagreement: dict | None = None
    skipped: str | None = None
    duration_s: float = 0.0
    programs: float = 0.0  # this case's share of the programs it ran in (1/N of a program of N)
    alone: int = 0  # times it ran alone (sweep.run_case)


@dataclass
class Doubt:
    """Cells of a program that are not kept: `own` failed on the case's own outputs (rerun the case alone), `whole`
    are the program's failure at that backend and precision (split the program to find whose)."""
    own: set[Pair] = field(default_factory=set)
    whole: set[Pair] = field(default_factory=set)


def run_case(case: Case, config: SweepConfig, reg, work: Path) -> tuple[CaseOutcome, list]:
    """One case run alone: a quantized graph judged against its own emulation at its own format
    (analysis/ops/quantized.py), any other as check's one-op model at every precision (sweep.run_case)."""
    if quantized.is_quantized(case):
        return quantized.run_case(case, config, reg, work)
    return run_float_case(case, config, reg, work)


# ---------------------------------------------------------------------------------------------------------------
# which cases share a program


def why_alone(case: Case, reg, config: SweepConfig) -> str | None:
    """Why a case runs alone as before (None: it can share a program). Integer-valued cases are judged by the flip
    rule (verdict.OPS_RULES) on all their outputs; cases with dynamic dims get shape variants of their own; a payload
    that writes itself (a fuzz graph) is a model already; an ONNX graph with subgraphs, functions or sparse
    initializers cannot be renamed into another safely; a torch case whose op does not run here has no outputs to
    count. Each of these would change what is tested, so it is not batched."""
    if case.integer_valued:
        return "integer-valued outputs are judged by flips"
    if quantized.is_quantized(case):
        return "a quantized graph is judged against its own emulation"
    if callable(getattr(case.payload, "write", None)):
        return "the payload writes its own model"
    kind = _kind(case)
    if kind is None:
        return "not a catalog case"
    if not any(kind in reg.cls(b).kinds for b in config.backends):
        return f"no backend takes {kind} models"
    return _torch_alone(case.payload) if kind == TORCH else _onnx_alone(case.payload)


def _kind(case: Case) -> str | None:
    """The model kind a case is written as: torch (a spec) or onnx."""
    if case.catalog == TORCH_CATALOG and isinstance(case.payload, TorchSample):
        return TORCH
    if case.catalog == ONNX_CATALOG and isinstance(case.payload, OnnxSample):
        return ONNX
    return None


def _torch_alone(payload: TorchSample) -> str | None:
    """Why a torch case cannot share a program: dynamic dims, or outputs that are not all tensors here."""
    if any(payload.dynamic):
        return "dynamic dims get their own shape variants"
    try:
        n = len(_torch_outputs(payload))
    except Exception:  # noqa: BLE001 - the op does not run eagerly here: alone, its reference says why
        return "the op does not run in float64 here"
    return None if n else "no tensor output"


def _torch_outputs(payload: TorchSample) -> list[torch.Tensor]:
    """The op's outputs flattened as a program returns them; raises where an output is not a tensor."""
    from fpdiff.analysis.ops.torch_catalog import OneOp, case_tensors
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = OneOp(payload).call(*case_tensors(payload))
    leaves = pytree.tree_flatten(out, is_leaf=lambda x: x is None)[0]
    if not all(isinstance(x, torch.Tensor) for x in leaves):
        raise TypeError("a non-tensor output")
    return leaves


def _onnx_alone(payload: OnnxSample) -> str | None:
    """Why an ONNX case cannot share a program: functions, subgraphs, sparse or non-static inputs."""
    from onnx import AttributeProto
    model = payload.model
    if model.functions or model.graph.sparse_initializer:
        return "model-local functions or sparse initializers"
    subgraphs = (AttributeProto.GRAPH, AttributeProto.GRAPHS)
    if any(a.type in subgraphs for n in model.graph.node for a in n.attribute):
        return "a subgraph attribute refers to outer names"
    for vi in model.graph.input:
        t = vi.type.tensor_type
        if not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
            return "symbolic input dims get their own shape variants"
    return None


def _group_key(case: Case) -> tuple:
    """Cases that can share a program: one kind; ONNX cases also one IR version and one opset per domain."""
    if _kind(case) == TORCH:
        return (TORCH,)
    m = case.payload.model
    return (ONNX, m.ir_version, tuple(sorted((o.domain, o.version) for o in m.opset_import)))


def groups(cases: Sequence[Case], size: int, reg, config: SweepConfig) -> list[list[Case]]:
    """The cases as programs of at most `size` cases that share a group key, and the rest alone, in the order their
    first case comes; `size` 1 is every case alone (the sweep before programs)."""
    out: list[list[Case]] = []
    open_: dict[tuple, list[Case]] = {}
    for case in cases:
        if size <= 1 or why_alone(case, reg, config) is not None:
            out.append([case])
            continue
        key = _group_key(case)
        if key not in open_ or len(open_[key]) >= size:
            open_[key] = []
            out.append(open_[key])
        open_[key].append(case)
    return out


# ---------------------------------------------------------------------------------------------------------------
# the program as a model


class Program(torch.nn.Module):
    """Every case's op on its own inputs, their outputs flattened one after another (a program spec subclasses it
    with a forward that names the inputs, as the one-op spec does)."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        super().__init__()
        from fpdiff.analysis.ops.torch_catalog import OneOp, load_payload
        self.ops = torch.nn.ModuleList(OneOp(load_payload(p)) for p in paths)

    def calls(self, *tensors: torch.Tensor) -> tuple:
        """Each op on its share of the inputs; all their outputs in order."""
        outs: list = []
        at = 0
        for op in self.ops:
            n = len(op.tensor_at)
            outs += pytree.tree_flatten(op.call(*tensors[at:at + n]), is_leaf=lambda x: x is None)[0]
            at += n
        return tuple(outs)


def program_inputs(paths: Sequence[str | Path]) -> tuple[torch.Tensor, ...]:
    """Every case's inputs, one case after another."""
    from fpdiff.analysis.ops.torch_catalog import case_inputs
    return tuple(t for p in paths for t in case_inputs(p))


_SPEC = '''"""fpdiff ops: {n} one-op cases as one program, each op on its own inputs: {ids}."""
from pathlib import Path

from fpdiff.analysis.ops.batch import Program, program_inputs

CASES = {pts!r}  # each case's payload, as its one-op spec saves it
CASES_SHA256 = {shas!r}  # new cases are a new program (and a new fingerprint)


class Model(Program):
    def forward(self, {args}):
        return self.calls({args})


def model():
    return Model([Path(__file__).parent / p for p in CASES])


def inputs():
    return program_inputs([Path(__file__).parent / p for p in CASES])
'''


def write_program(cases: Sequence[Case], folder: Path) -> tuple[str, str | None, list[tuple[int, int]]]:
    """(model path, inputs npz or None, each case's [start, end) among the outputs) of the cases as one model."""
    folder.mkdir(parents=True, exist_ok=True)
    if _kind(cases[0]) == TORCH:
        return _torch_program(cases, folder)
    return _onnx_program(cases, folder)


def _torch_program(cases: Sequence[Case], folder: Path) -> tuple[str, None, list[tuple[int, int]]]:
    """The program spec: each case's payload saved as its one-op spec saves it, one forward calling them all."""
    from fpdiff.analysis.ops.torch_catalog import input_names, write_case
    pts, names, spans, at = [], [], [], 0
    for i, case in enumerate(cases):
        pts.append(Path(write_case(case, folder / f"c{i}")[0]).with_suffix(".pt").relative_to(folder).as_posix())
        names += [f"c{i}_{n}" for n in input_names(case.payload)]
        n = len(_torch_outputs(case.payload))
        spans.append((at, at + n))
        at += n
    shas = [hashlib.sha256((folder / p).read_bytes()).hexdigest() for p in pts]
    spec = folder / "program.py"
    spec.write_text(_SPEC.format(n=len(cases), ids=", ".join(c.case_id for c in cases)[:300], pts=pts, shas=shas,
                                 args=", ".join(names)))
    return str(spec), None, spans


def _onnx_program(cases: Sequence[Case], folder: Path) -> tuple[str, str, list[tuple[int, int]]]:
    """One graph holding each case's nodes side by side, every name of case i prefixed c{i}_, and its inputs."""
    import onnx
    from onnx import helper
    graph = onnx.GraphProto(name="fpdiff_ops_program")
    feeds: dict[str, np.ndarray] = {}
    spans, at = [], 0
    for i, case in enumerate(cases):
        _add_renamed(graph, case.payload.model.graph, f"c{i}_")
        feeds.update({f"c{i}_{k}": v for k, v in case.payload.inputs.items()})
        n = len(case.payload.model.graph.output)
        spans.append((at, at + n))
        at += n
    first = cases[0].payload.model
    model = helper.make_model(graph, opset_imports=list(first.opset_import), producer_name="fpdiff ops")
    model.ir_version = first.ir_version
    path, npz = folder / "program.onnx", folder / "program.npz"
    onnx.save(model, str(path))
    np.savez(npz, **feeds)
    return str(path), str(npz), spans


def _add_renamed(into, graph, prefix: str) -> None:
    """A case's graph added to `into` with every value and node name prefixed (an empty name, an omitted optional
    input, stays empty)."""
    def name(x: str) -> str:
        return prefix + x if x else x

    for node in graph.node:
        n = into.node.add()
        n.CopyFrom(node)
        n.name = name(node.name)
        del n.input[:], n.output[:]
        n.input.extend(name(x) for x in node.input)
        n.output.extend(name(x) for x in node.output)
    for src, dst in ((graph.input, into.input), (graph.output, into.output), (graph.value_info, into.value_info),
                     (graph.initializer, into.initializer)):
        for item in src:
            copy = dst.add()
            copy.CopyFrom(item)
            copy.name = name(item.name)


# ---------------------------------------------------------------------------------------------------------------
# running and judging


@dataclass
class Context:
    """What every program of a batch shares."""
    config: SweepConfig
    reg: object
    work: Path
    made: int = 0  # programs written so far in this batch: each its own folder


def run_group(group: Sequence[Case], ctx: Context) -> Iterator[tuple[CaseOutcome, list]]:
    """The outcome of every case of a group and its repros' requests: a lone case as before, a program's cases
    resolved (`resolve`)."""
    if len(group) == 1:
        outcome, requests = run_case(group[0], ctx.config, ctx.reg, ctx.work)
        outcome.alone = 1
        yield outcome, requests
        return
    pairs = _pairs(ctx.config, ctx.reg, _kind(group[0]))
    found = resolve(list(group), pairs, ctx)
    for case in group:
        yield _outcome(case, found[case.case_id], pairs)


def _pairs(config: SweepConfig, reg, kind: str | None) -> list[Pair]:
    """The (backend, precision) cells a case of this kind gets, in grid order."""
    return [(b, p) for b in config.backends if kind in reg.cls(b).kinds for p in config.precisions]


def resolve(cases: list[Case], pairs: Sequence[Pair], ctx: Context) -> dict[str, Found]:
    """Every case's cells at `pairs`: run as one program, the passes kept; a case whose own outputs fail rerun alone;
    the cases of a program that fails as a whole split in halves and resolved again (a lone case runs alone)."""
    if len(cases) == 1:
        return {cases[0].case_id: _alone(cases[0], pairs, ctx)}
    found, doubts = _program(cases, pairs, ctx)
    halve = [c for c in cases if doubts[c.case_id].whole]
    for case in cases:
        d = doubts[case.case_id]
        if d.own and not d.whole:
            _merge(found[case.case_id], _alone(case, _ordered(pairs, d.own), ctx))
    if halve:
        wanted = _ordered(pairs, set().union(*(doubts[c.case_id].own | doubts[c.case_id].whole for c in halve)))
        mid = len(halve) // 2
        for part in ([halve] if len(halve) == 1 else [halve[:mid], halve[mid:]]):
            for cid, got in resolve(part, wanted, ctx).items():
                _merge(found[cid], got)
    return found


def _ordered(pairs: Sequence[Pair], wanted: set[Pair]) -> list[Pair]:
    return [p for p in pairs if p in wanted]


def _merge(into: Found, got: Found) -> None:
    """What a later run found of a case, added to what a program kept of it."""
    into.cells.update(got.cells)
    into.requests += got.requests
    into.disagreement = into.disagreement or got.disagreement
    into.skipped = into.skipped or got.skipped
    into.duration_s += got.duration_s
    into.programs += got.programs
    into.alone += got.alone


def _alone(case: Case, pairs: Sequence[Pair], ctx: Context) -> Found:
    """The case run alone at `pairs` (and fp32 where the sweep has it: an fp16 refusal's remedy reads whether fp32
    ran), as the sweep runs every case without programs; only the cells at `pairs` are taken."""
    backends = list(dict.fromkeys(b for b, _ in pairs))
    precisions = [p for p in ctx.config.precisions if p == prec.FP32.name or any(q == p for _, q in pairs)]
    narrow = dataclasses.replace(ctx.config, backends=tuple(backends), precisions=tuple(precisions))
    outcome, requests = run_case(case, narrow, ctx.reg, ctx.work)
    wanted = set(pairs)
    cells = {(c.backend, c.precision): c for c in outcome.cells if (c.backend, c.precision) in wanted}
    requests = [r for r in requests if (r[2].backend, r[2].precision) in wanted]
    return Found(cells, requests, outcome.disagreement, outcome.skipped, outcome.duration_s, alone=1)


def _outcome(case: Case, found: Found, pairs: Sequence[Pair]) -> tuple[CaseOutcome, list]:
    """A resolved case as the sweep's outcome: its cells in grid order (none when it could not be judged)."""
    cells = [] if found.skipped else [found.cells[p] for p in pairs if p in found.cells]
    out = CaseOutcome(case.case_id, cells, found.skipped, found.disagreement, duration_s=found.duration_s,
                      programs=found.programs, alone=found.alone)
    return out, [] if found.skipped else found.requests


def _program(cases: list[Case], pairs: Sequence[Pair], ctx: Context) -> tuple[dict[str, Found], dict[str, Doubt]]:
    """The cases as one program at `pairs`: each case's kept cells, and the cells it cannot keep."""
    found = {c.case_id: Found(programs=1 / len(cases)) for c in cases}
    doubts = {c.case_id: Doubt() for c in cases}
    everything = set(pairs)
    ctx.made += 1
    folder = ctx.work / f"program-{ctx.made}-{safe_name(cases[0].case_id)}"
    try:
        grid, spans = _grid(cases, pairs, ctx, folder)
        results, ref = run_grid(grid, ctx.config.timeout, worker_env(), None)
    except (UsageError, ReferenceFailed):  # written or referenced as a whole, it fails: whose it is, halves tell
        for d in doubts.values():
            d.whole |= everything
        return found, doubts
    witness = results.get(grid.cross_check) if grid.cross_check is not None else None
    if ref.status != Status.OK or (witness is not None and witness.status != Status.OK) or \
            any(k.variant != STATIC for k in grid.cells):
        # the judge, or its cross-check, failed on the program (a case alone may find its judge suspect, and then
        # judge by witnesses), or the program got shape variants: no pass is known to be the case's own
        for d in doubts.values():
            d.whole |= everything
        return found, doubts
    share = _Shared(grid, results, ref, len(cases), worker_env(), ctx.config.timeout)
    for case, span in zip(cases, spans):
        _judge_case(case, span, share, found[case.case_id], doubts[case.case_id], set(pairs))
    return found, doubts


def _grid(cases: list[Case], pairs: Sequence[Pair], ctx: Context, folder: Path) -> tuple[Grid, list]:
    """The program as a check grid at `pairs`' backends and precisions, and each case's span of its outputs."""
    config = ctx.config
    model, inputs, spans = write_program(cases, folder)
    backends = list(dict.fromkeys(b for b, _ in pairs))
    precisions = list(dict.fromkeys(p for _, p in pairs))
    grid = make_grid(model, ctx.reg, config.grid(backends, precisions, inputs))
    return grid, spans


@dataclass
class _Shared:
    """A program's grid and job results, and the jobs a rule asked for later (run once, sliced for every case)."""
    grid: Grid
    results: dict[CellKey, JobResult]
    ref: JobResult
    n: int
    env: dict
    timeout: float

    def run(self, key: CellKey) -> JobResult:
        if key not in self.results:
            with external.pool(self.env) as pool:
                self.results[key] = pool.run(self.grid.job(key), self.timeout)
        return self.results[key]


@dataclass
class _Slice(Evidence):
    """One case's evidence in a program: every job's outputs cut to the case's span; a job a rule asks for later
    runs on the program once and is cut the same way."""
    share: _Shared | None = None
    span: tuple[int, int] = (0, 0)
    ops: frozenset = frozenset()

    def run(self, key: CellKey) -> JobResult:
        if key not in self.results:
            self.results[key] = cut(self.share.run(key), self.span, self.share.n, self.ops)[0]
        return self.results[key]


def _judge_case(case: Case, span: tuple[int, int], share: _Shared, found: Found, doubt: Doubt,
                pairs: set[Pair]) -> None:
    """One case judged by check's rules on its own outputs: its passing cells kept, the rest doubted."""
    grid, env, timeout = share.grid, share.env, share.timeout
    ops = _own_ops(case)
    cuts = {k: cut(r, span, share.n, ops) for k, r in share.results.items()}
    results = {k: r for k, (r, _) in cuts.items()}
    ref = cut(share.ref, span, share.n, ops)[0]
    judge = _judge_check(grid, results, ref, env, timeout)
    found.disagreement = verdict.expected_disagreement(case, ref.outputs)
    if judge is None:  # this case's outputs part the judge from its cross-check: alone, check weighs that
        doubt.own |= pairs
        return
    ev = _Slice(grid, results, ref, judge, env, timeout, share=share, span=span, ops=ops)
    first = first_verdicts(ev)
    for c, k in zip(first, grid.cells):
        if c.status != Status.PASS:
            (doubt.whole if share.results[k].status != Status.OK else doubt.own).add((k.backend, k.precision.name))
    passing = [k for c, k in zip(first, grid.cells) if c.status == Status.PASS]
    sub = _Slice(dataclasses.replace(grid, cells=passing), results, ref, judge, env, timeout, kept=dict(ev.kept),
                 share=share, span=span, ops=ops)
    judged = judge_run(sub, CHECK_RULES)
    saved = {"rules": verdict.CHECK, **evidence.save(sub)}
    for c, k in zip(judged, passing):
        pair = (k.backend, k.precision.name)
        if c.status != Status.PASS or not cuts[k][1]:
            doubt.own.add(pair)
            continue
        cell = ops_cell(case, c, results[k], saved)
        cell.info["program"] = {"cases": share.n}  # judged on its own outputs in a program of this many cases
        found.cells[pair] = cell


def _judge_check(grid: Grid, results: dict, ref: JobResult, env: dict, timeout: float):
    """check's cross-check of the judge on the case's outputs, or None where it would find the judge suspect (the
    case alone then runs check's witnesses, which a program's slice cannot)."""
    key = grid.cross_check
    if key is not None:
        r, own = results.get(key), results.get(grid.judge_fp32)
        fp32 = grid.judge_fp32.precision
        if r is not None and r.status == Status.OK:
            m = _measure(ref.outputs, r, fp32)
            base = _measure(ref.outputs, own, fp32)
            if m is None or compare.judge(m, fp32, base).status == Status.MISMATCH:
                return None
    return cross_check(grid, results, ref.outputs, env=env, timeout=timeout)


def _measure(ref: list, r: JobResult | None, p) -> compare.Metrics | None:
    if r is None or r.status != Status.OK or len(r.outputs) != len(ref) or any(
            a.shape != b.shape for a, b in zip(r.outputs, ref)):
        return None
    return compare.measure(ref, r.outputs, p.compute)


def cut(r: JobResult, span: tuple[int, int], n: int, ops: frozenset) -> tuple[JobResult, bool]:
    """A program's job as one case's: its outputs in the case's span, its time shared among the program's cases,
    its runtime's support record narrowed to the case's own ops where the record names them; and whether that
    record says the case's own state (_own_support). A program's export departure (float32 constants of some case)
    is not put on every case: a case that needs it fails here and is judged alone, where it is measured."""
    if r.status != Status.OK:
        return r, True
    a, b = span

    def part(xs: list) -> list:
        return list(xs[a:b]) if len(xs) >= b else list(xs)
    support, own = _own_support(r.support, ops)
    return dataclasses.replace(r, outputs=part(r.outputs), output_dtypes=part(r.output_dtypes),
                               repeats=[part(x) for x in r.repeats], output_names=part(r.output_names),
                               export_departure=None, prepare_s=r.prepare_s / n, run_s=r.run_s / n,
                               support=support), own


def _own_ops(case: Case) -> frozenset:
    """The op types a runtime's record would name for this case alone: an ONNX case's node types; a torch case's op
    name (its exported node types are not known before export, so only a record in one state says the case's)."""
    if _kind(case) == ONNX:
        return frozenset(n.op_type for n in case.payload.model.graph.node if n.op_type not in _CASTS)
    return frozenset()


def _own_support(record: Support | None, ops: frozenset) -> tuple[Support | None, bool]:
    """The support record as the case's own: narrowed to its op types when the record names them all; else the
    program's whole record, which says the case's state only when every op it names is in one state."""
    if record is None:
        return None, True
    if record.cut:  # the record is cut: the case's op may be left out
        return record, False
    if ops and ops <= set(record.ops):
        return record.narrowed(ops), True
    states = {e.get("state") for _, e in record.entries() if e.get("state") in STATES}
    return record, len(states) <= 1


def run_batch(cases: Sequence[Case], config: SweepConfig,
              progress: Callable[[CaseOutcome], None] | None = None) -> list[CaseOutcome]:
    """Every case of the batch, in one shared set of workers, its programs' cases together (batch.py); a case that
    breaks costs that case. Outcomes come in the cases' order."""
    got: dict[str, CaseOutcome] = {}
    with rundir.run_directory(), external.shared(worker_env()):
        reg = registry(config.plugins)
        ctx = Context(config, reg, rundir.mkdtemp(prefix="fpdiff-ops-"))
        for group in groups(cases, config.program_size, reg, config):
            if config.deadline is not None and time.time() > config.deadline:
                got.update({c.case_id: CaseOutcome(c.case_id, unrun=True) for c in group})
                continue
            for outcome, requests in run_group(group, ctx):
                if config.repro_dir:
                    verdict.write_repros(requests, Path(config.repro_dir))
                got[outcome.case_id] = outcome
                if progress:
                    progress(outcome)
        out = [got[c.case_id] for c in cases]
        if config.recheck:
            verdict.recheck_repros([c for o in out for c in o.cells])
    return out
