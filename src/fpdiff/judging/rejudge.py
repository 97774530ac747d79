"""A verdict is only as good as its judge and its input: the float64 judge is cross-checked (and, when suspect, put
to independent witnesses), cells a suspect judge alone condemns are held or judged by the majority, and a mismatch
within the model's own sensitivity to rounding is the model's, not the backend's (conditioning.py)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.compare import Metrics
from fpdiff.core.errors import ONNX_EXPORT
from fpdiff.core.status import Status
from fpdiff.core.task import ONNX, TORCH
from fpdiff.judging import conditioning
from fpdiff.judging import judge as judge_mod
from fpdiff.judging import rules as rules_mod
from fpdiff.judging.cell import Cell
from fpdiff.judging.cells import (
    first_verdicts,
    narrower_formats,
    shape_variants,
    survives_precision,
)
from fpdiff.judging.grid import CellKey, Grid
from fpdiff.judging.rules import MAJORITY, STAND_IN, Evidence, Missing, Rule
from fpdiff.judging.run import Progress, run_grid
from fpdiff.model.graph import STATIC
from fpdiff.onnxtools.export import DEPARTS, float64_checked
from fpdiff.runtime import external
from fpdiff.runtime.worker import JobResult


def question_judge(grid: Grid, results: dict[CellKey, JobResult], ref: JobResult, env: dict, timeout: float,
                   repro_dir: str | None) -> judge_mod.JudgeCheck:
    """The judge's cross-check against an independent fp32 run; when suspect, the witnesses' verdict; when the
    judge's own run failed, whether a majority of witnesses can stand in for it."""
    if ref.status != Status.OK:
        return _failed_judge(grid, results, ref, env, timeout, repro_dir)
    ref_out = ref.outputs
    verdict = judge_mod.cross_check(grid, results, ref_out, env=env, timeout=timeout)
    if verdict.status == judge_mod.SUSPECT:
        _consult_witnesses(verdict, grid, results, ref_out, env, timeout, repro_dir)
    return verdict


def judge_failed(ev: Evidence, cells: list[Cell]) -> None:
    """A failed judge nothing stands in for: every cell that ran says so instead of a verdict."""
    judge_mod.unjudged_without_judge(ev.verdict, cells)


def judge_suspect(ev: Evidence, cells: list[Cell]) -> None:
    """A suspect judge: a mismatch or precision-loss stands only where the independent run reads the same."""
    if ev.verdict.status == judge_mod.SUSPECT and not ev.stored:
        _measure_all(ev, STAND_IN)
    judge_mod.hold_unconfirmed(ev.verdict, cells, ev.grid.cells, lambda key: _against(ev, key))


def judge_majority(ev: Evidence, cells: list[Cell]) -> None:
    """An overruled (or failed) judge: cells judged against the majority's fp32 reading."""
    if ev.verdict.reading is not None and not ev.stored:
        _measure_all(ev, MAJORITY)
    judge_mod.judge_by_majority(ev.verdict, cells, ev.grid.cells, lambda key: _by_majority(ev, key))


def _measure_all(ev: Evidence, against: str) -> None:
    """Every cell and baseline measured against a reading, whatever its verdict now: a stored run then has what a
    changed rule may ask of any cell (a measurement costs one pass over the outputs)."""
    for key in [*ev.grid.cells, *ev.grid.baselines.values()]:
        ev.metrics(key, against)


def conditioning_rule(ev: Evidence, cells: list[Cell]) -> None:
    """A mismatch no larger than the float64 reference's own movement under rounding-sized perturbations is the
    model's; not measured when the judge failed (the model's sensitivity is measured by the judge)."""
    if ev.verdict.status == judge_mod.FAILED:
        return
    conditioning.reconsider(ev, cells)


def blame_exporter(ev: Evidence, cells: list[Cell]) -> None:
    """A torch model's mismatch on a backend that ran torch.onnx's graph: is that graph the torch program's function?
    Exports are checked against their program only in float64 (onnxtools/export.py), so the backend's fp64 job decides
    (asked for when the grid has none): when the exporter's float64 graph computes another function, the mismatch is
    torch.onnx's error at every precision of that backend, and the backend's numbers on that graph are not judged.
    Where the float64 check did not judge the cell's graph (the evaluator refused it, the fp64 job failed past the
    export), the fp32 graph run by the backend and by the ONNX reference evaluator decides (_fp32_graph_departs); with
    neither, the mismatch stands. A precision-loss cell of that backend on the same exporter's graph is charged with
    it (the same function at a narrower precision: a loss beside the baseline there says nothing of the precision);
    alone, a precision-loss cell asks for no evidence."""
    grid, results = ev.grid, ev.results
    if grid.source.ref.kind != "torch":
        return
    exported = [(c, k) for c, k in zip(cells, grid.cells) if c.status in (Status.MISMATCH, Status.PRECISION_LOSS)
                and results[k].info.get("onnx_exporter")]
    for b in dict.fromkeys(c.backend for c, _ in exported if c.status == Status.MISMATCH):
        fp64 = ev.run(grid.key(b, "cpu", prec.FP64, STATIC))
        charged: dict[str, tuple[str, str | None, str]] = {}  # exporter -> (why, whose graph, shown at)
        for c, k in exported:
            exporter = results[k].info.get("onnx_exporter")
            if c.backend != b or c.status != Status.MISMATCH:
                continue
            why, shown = _exporter_departs(fp64, exporter), prec.FP64
            if why is None and not _float64_judged(fp64, exporter):
                why, shown = _fp32_graph_departs(ev, k, exporter), prec.FP32
            if why:
                charged[exporter] = (why, fp64.info.get(DEPARTS) if shown.is_float64 else exporter, shown.name)
                _charge_exporter(c, *charged[exporter])
        for c, k in exported:
            exporter = results[k].info.get("onnx_exporter")
            if c.backend == b and c.status == Status.PRECISION_LOSS and exporter in charged:
                _charge_exporter(c, *charged[exporter])


def _charge_exporter(c: Cell, why: str, whose: str | None, shown: str) -> None:
    """The cell as torch.onnx's error at export: its backend computed a graph that is not the program's function."""
    c.revise(EXPORTER, Status.ERROR, f"torch.onnx at onnx export failed: {why}; {c.backend}'s numbers on that "
             f"graph are not judged (was {c.status.value}: {c.reason})", why=why)
    c.stage, c.component = ONNX_EXPORT, "torch.onnx"
    c.info = {**c.info, BLAMED: whose, BLAMED_AT: shown}  # whose graph departed (dynamo, torchscript), and where


EXPORTER = "exporter"
# a cell the exporter rule charged to torch.onnx: its info names the exporter whose graph departed (the op sweep's
# repro exports the graph again), and the precision the departure was shown at (fp64: the float64 export check;
# fp32: the backend and the reference evaluator agreeing on the fp32 graph), where the repro shows it again
BLAMED = "exporter_blamed"
BLAMED_AT = "exporter_blamed_at"
# Where the float64 export check could not judge a graph, two implementations of ONNX on the fp32 graph decide: the
# backend and the ONNX reference evaluator (numpy, written apart from every runtime). The inference: two fp32
# implementations of one function that differ only in rounding (their order of sums, their libm) part from each other
# about as far as each parts from float64; two that agree far more tightly than both depart computed the same function
# (that graph's, as ONNX defines it), and a function that departs from torch's on the same fp32 inputs while torch's
# own fp32 run does not is another function: the exporter's translation, not the backend. It is sound only beyond
# what a shared order of rounding can explain (two runtimes both summing in fp32 left to right agree to the bit and
# both trail torch's double accumulator): so the evaluator must itself be a mismatch by the float rule, the two must
# agree within fp32's tolerance and AGREEMENT_FACTOR times closer than the departure, and the departure must exceed
# ANOTHER_FUNCTION, beyond what fp32 rounding moves (a sum of K terms moves by at most K x 6e-8 in the worst order:
# the op sweep's longest, 16384 terms, by 1e-3; 1e-2 would take 160,000 terms all rounding one way). What it cannot
# tell: a misreading of the ONNX spec that the backend and the reference evaluator share is charged to the exporter.
AGREEMENT_FACTOR = 100.0
ANOTHER_FUNCTION = 1e-2


# check's rules after the first verdict, in order. Findings of shape variants first (they read the first verdicts);
# the computed format before survives-precision (a cell it moves to precision-loss is then held to the format
# asked); the judge's rules before the exporter's and conditioning (a cell the judge cannot judge is neither blamed
# on the exporter nor measured against the model's sensitivity); conditioning last (it reads the final mismatches).
CHECK_RULES: tuple[Rule, ...] = (
    Rule("shape-variants", shape_variants),
    Rule("computed-format", narrower_formats),
    Rule("survives-precision", survives_precision),
    Rule("judge-failed", judge_failed),
    Rule("judge-suspect", judge_suspect),
    Rule("judge-majority", judge_majority),
    Rule(EXPORTER, blame_exporter),
    Rule("conditioning", conditioning_rule),
)


def judge_run(ev: Evidence, rules: Sequence[Rule] = CHECK_RULES) -> list[Cell]:
    """The cells' first verdicts and then `rules` (check's, or an analysis's own list built from them)."""
    return rules_mod.judge(ev, first_verdicts, rules)


def _exporter_departs(fp64: JobResult, exporter: str | None) -> str | None:
    """Why the exporter that made a cell's graph computes another function, from the backend's float64 job: its
    export failed the check outright, or the check threw out that exporter's graph for the fallback's."""
    departs = fp64.info.get(DEPARTS)
    failed = fp64.status == Status.ERROR and fp64.stage == ONNX_EXPORT
    # a failed export names the last graph that departed: "torchscript" when both did, "dynamo" when the fallback
    # raised instead, and then the TorchScript exporter's graph was never checked
    if failed and departs and departs in ("torchscript", exporter):
        return f"its float64 export computes another function than the torch program ({fp64.message})"
    if exporter == "dynamo" and departs == "dynamo" and not failed:
        why = fp64.info.get("onnx_exporter_why") or ""
        return f"its dynamo exporter's float64 graph computes another function than the torch program ({why})"
    return None


def _float64_judged(fp64: JobResult, exporter: str | None) -> bool:
    """Whether the float64 export check judged the graph of the cell's exporter (so it decides alone): the fp64 job
    ran that exporter's checked graph, or the check threw that exporter's graph out."""
    if fp64.status == Status.OK and fp64.info.get("onnx_exporter") == exporter:
        return float64_checked(fp64.info)
    return exporter == "dynamo" and fp64.info.get(DEPARTS) is not None


def _fp32_graph_departs(ev: Evidence, key: CellKey, exporter: str | None) -> str | None:
    """Why the cell's exporter's fp32 graph computes another function than the program: its backend and the ONNX
    reference evaluator agree on that graph while both depart from float64 (the inference and its limits: beside
    ANOTHER_FUNCTION). None where they do not, or where either did not run it."""
    grid = ev.grid
    evaluator = grid.reg.judge_for(ONNX)  # the backend that judges ONNX models: the ONNX reference evaluator
    ours = grid.key(key.backend, "cpu", prec.FP32, key.variant)
    theirs = grid.key(evaluator, "cpu", prec.FP32, key.variant)
    if key.backend == evaluator or TORCH not in grid.reg.cls(evaluator).kinds:
        return None
    try:  # both export the program by one route (runtime/task.py's onnx_file): the evaluator runs the cell's graph
        mine, ref = ev.run(ours), ev.run(theirs)
    except Missing as e:  # a stored run from before this evidence: the mismatch stands as it was judged
        ev.skipped.append(f"{EXPORTER}: the stored run lacks {e}")
        return None
    if mine.status != Status.OK or ref.status != Status.OK or mine.info.get("onnx_exporter") != exporter:
        return None
    p = ours.precision
    departs = ev.metrics(theirs)
    if departs is None or not departs.rel_l2 > ANOTHER_FUNCTION or \
            compare.judge(departs, p, ev.baseline(p)).status != Status.MISMATCH:
        return None
    apart = ev.keep(f"metrics {theirs} {ours}", lambda: _apart(ref, mine, p))
    if not isinstance(apart, Metrics) or not apart.rel_l2 <= min(p.tolerance, departs.rel_l2 / AGREEMENT_FACTOR):
        return None
    return (f"its fp32 graph computes another function than the torch program: {key.backend} and the ONNX reference "
            f"evaluator agree on it (rel L2 {apart.rel_l2:.1e} apart) while both depart from float64 (the evaluator "
            f"by rel L2 {departs.rel_l2:.2e}; torch's own fp32 does not), and the float64 export check did not judge "
            "that graph")


def _apart(ref: JobResult, mine: JobResult, p) -> Metrics | None:
    """The backend's outputs measured against the evaluator's on the same graph; None where they are shaped apart."""
    if len(ref.outputs) != len(mine.outputs) or any(a.shape != b.shape for a, b in zip(ref.outputs, mine.outputs)):
        return None
    return compare.measure(ref.outputs, mine.outputs, p.compute)


def _against(ev: Evidence, key: CellKey) -> compare.Judgement | None:
    """The cell measured against the independent implementation instead of the judge."""
    p = key.precision
    m = ev.metrics(key, STAND_IN)
    if m is None:
        return None
    return compare.judge(m, p, ev.metrics(ev.grid.baseline(p), STAND_IN))


def _failed_judge(grid: Grid, results: dict, ref: JobResult, env: dict, timeout: float,
                  repro_dir: str | None) -> judge_mod.JudgeCheck:
    """The judge's float64 run failed: said with the op it failed at, and the witnesses asked to stand in."""
    from fpdiff.onnxtools.evaluator import FAILED_NODE
    failed_op = ref.op or (ref.info.get(FAILED_NODE) or {}).get("op_type")
    check = judge_mod.JudgeCheck("ONNX reference evaluator float64", status=judge_mod.FAILED, failed_op=failed_op,
                                 message=f"the float64 judge failed: {ref.message}")
    keys = _witnesses(grid, results, [], env, timeout)
    judge_mod.stand_in_majority(check, results, [k for k in keys if k in results], grid.judge_fp32.precision,
                                [k.backend for k in keys if k not in results])
    if repro_dir:
        judge_mod.write_failed_repro(grid.source, check, ref, repro_dir)
    return check


def _witnesses(grid: Grid, results: dict, first: list, env: dict, timeout: float) -> list[CellKey]:
    """Every independent implementation (declared `independent`) at fp32, `first` first: those in the grid, and the
    others available here run now when the graph is small enough for one more compile (judge.WITNESS_MAX_NODES)."""
    reg, source = grid.reg, grid.source
    independent = [b for b in reg.names() if reg.cls(b).independent and source.ref.kind in reg.cls(b).kinds
                   and b != grid.judge_backend]
    keys = [*first] + [grid.key(b, "cpu", prec.FP32, grid.witness_variant) for b in independent]
    keys = [k for k in dict.fromkeys(keys) if k is not None]
    nodes = len(source.module.graph.node) if source.ref.kind == "onnx" else 0
    runnable = [k for k in keys if k not in results and reg.cls(k.backend).route is None
                and reg.create(k.backend).available() is None and nodes <= judge_mod.WITNESS_MAX_NODES]
    if runnable:
        with external.pool(env) as pool:
            for k in runnable:
                results[k] = pool.run(grid.job(k), timeout)
    return keys


def _consult_witnesses(check: judge_mod.JudgeCheck, grid: Grid, results: dict, ref_out, env: dict, timeout: float,
                       repro_dir: str | None) -> None:
    """A suspect judge asks every independent implementation at fp32 (_witnesses)."""
    keys = _witnesses(grid, results, [check.stand_in], env, timeout)
    asked = [k for k in keys if k in results]
    judge_mod.ask_witnesses(check, results, ref_out, grid.judge_fp32, asked, grid.judge_fp32.precision,
                            [k.backend for k in keys if k not in results])
    if check.status == judge_mod.OVERRULED:
        judge_mod.require_evidence(check, _run_repro(grid, check, repro_dir, timeout))


def _run_repro(grid: Grid, check: judge_mod.JudgeCheck, repro_dir: str | None, timeout: float) -> int | None:
    """Write the overruled judge's one-node repro (in the run's scratch folder when no repro_dir is kept) and run it:
    its exit code (1: it reproduces, 0: the judge's op is right), or None when it could not be made or run."""
    import os
    import subprocess
    import sys

    from fpdiff.runtime import rundir
    if not check.first_divergence:
        return None
    out = repro_dir or str(rundir.mkdtemp(prefix="fpdiff-judge-repro-"))
    try:
        judge_mod.write_repro(grid.source, check, out)
    except Exception as e:  # noqa: BLE001 - the verdicts stand without the repro; the report says why it is missing
        check.message += f"; the repro could not be written ({type(e).__name__}: {str(e)[:200]})"
    if not check.repro:
        return None
    try:
        env = {**os.environ, "FPDIFF_JUDGE_KERNELS": "1"}  # the evidence is about the judge's own kernels
        rc = subprocess.run([sys.executable, check.repro], capture_output=True, timeout=timeout, env=env).returncode
    except subprocess.TimeoutExpired:
        rc = None
    if not repro_dir:  # a scratch repro is not the user's to keep
        check.message = check.message.replace(f"; repro: python {check.repro}", "")
        check.repro = None
    return rc if rc in (0, 1) else None


def _by_majority(ev: Evidence, key: CellKey) -> compare.Judgement | None:
    """A cell against the majority's fp32 reading. Its baseline: at fp32 the witnesses' own spread around the
    reading; at other precisions the judge code's run there, only where it agrees with the reading within the
    precision's tolerance (the overruled judge's code usually carries its error into every dtype), else none.
    Precisions finer than fp32 cannot be judged against an fp32 reading (None)."""
    p, fp32 = key.precision, ev.grid.judge_fp32.precision
    if p.unit_roundoff < fp32.unit_roundoff:
        return None
    m = ev.metrics(key, MAJORITY)
    if m is None:
        return None
    if p.unit_roundoff == fp32.unit_roundoff:
        return compare.judge(m, p, ev.verdict.spread)
    bm = ev.metrics(ev.grid.baseline(p), MAJORITY)
    return compare.judge(m, p, bm if bm is not None and compare.judge(bm, p, None).status == Status.PASS else None)


class Judged(NamedTuple):
    """A grid judged: the evidence the rules judged from, the cells, and the float64 reference's own run."""
    evidence: Evidence
    cells: list[Cell]
    reference: JobResult


def judge_grid(grid: Grid, env: dict, timeout: float, progress: Progress | None, repro_dir: str | None) -> Judged:
    """A grid run and judged: every job, the judge questioned, the rules applied. Inside one worker pool of the
    caller's (external.shared), which every job a rule asks for reuses."""
    results, ref = run_grid(grid, timeout, env, progress)
    verdict = question_judge(grid, results, ref, env, timeout, repro_dir)
    ev = Evidence(grid, results, _stood_in(ref, verdict), verdict, env, timeout)
    return Judged(ev, judge_run(ev), ref)


def _stood_in(ref: JobResult, verdict: judge_mod.JudgeCheck) -> JobResult:
    """The reference the cells are measured against: the judge's run, or where it failed the reading of the witnesses
    that stand in for it (judge.stand_in_majority); None when nothing stands in (every cell that ran is unjudged,
    judge.unjudged_without_judge)."""
    if verdict.status != judge_mod.FAILED:
        return ref
    return replace(ref, status=Status.OK, outputs=list(verdict.reading) if verdict.reading is not None else None)

