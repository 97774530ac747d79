"""A verdict is only as good as its judge and its input: the float64 judge is cross-checked (and, when suspect, put
to independent witnesses), cells a suspect judge alone condemns are held or judged by the majority, and a mismatch
within the model's own sensitivity to rounding is the model's, not the backend's (conditioning.py)."""
from __future__ import annotations

from collections.abc import Sequence

from fpdiff.analysis.check import conditioning
from fpdiff.analysis.check import judge as judge_mod
from fpdiff.analysis.check import rules as rules_mod
from fpdiff.analysis.check.cells import (
    first_verdicts,
    metrics_or_none,
    narrower_formats,
    shape_variants,
    survives_precision,
)
from fpdiff.analysis.check.grid import CellKey, Grid
from fpdiff.analysis.check.result import Cell
from fpdiff.analysis.check.rules import MAJORITY, STAND_IN, Evidence, Rule
from fpdiff.core import compare
from fpdiff.core.compare import Metrics
from fpdiff.core.errors import ONNX_EXPORT
from fpdiff.core.status import Status
from fpdiff.model.graph import STATIC
from fpdiff.onnxtools.export import DEPARTS
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
    A float64 export that fails or cannot be checked decides nothing: the mismatch stands."""
    grid, results = ev.grid, ev.results
    if grid.source.ref.kind != "torch":
        return
    exported = [(c, k) for c, k in zip(cells, grid.cells) if c.status == Status.MISMATCH
                and results[k].info.get("onnx_exporter")]
    for b in dict.fromkeys(c.backend for c, _ in exported):
        fp64 = ev.run(grid.key(b, "cpu", "fp64", STATIC))
        for c, k in exported:
            if c.backend != b:
                continue
            why = _exporter_departs(fp64, results[k].info.get("onnx_exporter"))
            if why:
                c.revise(EXPORTER, Status.ERROR, f"torch.onnx at onnx export failed: {why}; {b}'s numbers on that "
                         f"graph are not judged (was mismatch: {c.reason})", why=why)
                c.stage, c.component = ONNX_EXPORT, "torch.onnx"
                c.info = {**c.info, BLAMED: fp64.info.get(DEPARTS)}  # whose graph departed: dynamo, torchscript


EXPORTER = "exporter"
# a cell the exporter rule charged to torch.onnx: its info names the exporter whose graph departed (the op sweep's
# repro exports the graph again)
BLAMED = "exporter_blamed"
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
    if fp64.status == Status.ERROR and fp64.stage == ONNX_EXPORT and departs:
        return f"its float64 export computes another function than the torch program ({fp64.message})"
    if exporter == "dynamo" and departs == "dynamo":
        why = fp64.info.get("onnx_exporter_why") or ""
        return f"its dynamo exporter's float64 graph computes another function than the torch program ({why})"
    return None


def _against(ev: Evidence, key: CellKey) -> compare.Judgement | None:
    """The cell measured against the independent implementation instead of the judge."""
    p = key.precision
    m = ev.metrics(key, STAND_IN)
    if not isinstance(m, Metrics):
        return None
    return compare.judge(m, p, metrics_or_none(ev.metrics(ev.grid.baseline(p), STAND_IN)))


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
    keys = [*first] + [grid.key(b, "cpu", "fp32", grid.witness_variant) for b in independent]
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
    if not isinstance(m, Metrics):
        return None
    if p.unit_roundoff == fp32.unit_roundoff:
        return compare.judge(m, p, ev.verdict.spread)
    bm = metrics_or_none(ev.metrics(ev.grid.baseline(p), MAJORITY))
    return compare.judge(m, p, bm if bm is not None and compare.judge(bm, p, None).status == Status.PASS else None)
