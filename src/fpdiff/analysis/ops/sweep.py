"""Runs cases: each case is written as a one-op model and checked by check's own steps (its grid, the float64
reference and baselines, the judge's cross-check, cell judging, conditioning), every case of a batch through one
shared set of workers, so a sweep of thousands of cases pays for one worker start per backend, not one per case;
cases of one kind share a program (batch.py: one export and compile for many cases, every failing cell rerun
alone), unless `program_size` is 1."""
from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fpdiff.analysis.ops import verdict
from fpdiff.analysis.ops.case import Case, OpsCell
from fpdiff.analysis.ops.catalog import write_case
from fpdiff.core.errors import ReferenceFailed, UsageError
from fpdiff.core.status import Status
from fpdiff.judging import evidence
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import Grid, GridSettings, make_grid
from fpdiff.judging.rejudge import BLAMED, BLAMED_AT, judge_run, question_judge
from fpdiff.judging.rules import Evidence
from fpdiff.judging.run import run_grid, worker_env
from fpdiff.onnxtools.export import DEPARTS
from fpdiff.runtime.worker import JobResult

# statuses that get a standalone repro: the backend computed something wrong, or failed without declaring a refusal
REPRO_STATUSES = (Status.MISMATCH, Status.ERROR, Status.CRASH)


@dataclass(frozen=True)
class SweepConfig:
    """Everything a batch needs besides its cases; plain values, so a batch can run on another host (Ray)."""
    backends: tuple[str, ...]
    precisions: tuple[str, ...]
    plugins: tuple[str, ...] = ()
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    timeout: float = 120.0
    seed: int = 0
    cache_dir: str | None = None  # None: no compile cache (sweep_config turns the default into the cache root)
    repro_dir: str | None = None  # where failing cells' repro bundles go (None: none written)
    recheck: bool = True  # rerun every repro in a fresh process and record whether it re-triggers
    deadline: float | None = None  # wall-clock time (time.time()) after which no case starts: --time's budget
    # cases per program (batch.py); 1: every case alone, as run_case's callers outside the sweep want
    program_size: int = 1

    def grid(self, backends: Sequence[str], precisions: Sequence[str], inputs: str) -> GridSettings:
        """A case's (or program's) grid: one run of each cell on the cpu, the case's own inputs and opset."""
        return GridSettings(tuple(backends), tuple(precisions), plugins=self.plugins, flags=self.flags,
                            cache_dir=self.cache_dir or False, seed=self.seed,
                            load_args={"inputs": inputs, "shapes": None, "seed": self.seed, "keep_opset": True})


@dataclass
class CaseOutcome:
    """What one case gave: its cells, or why it could not be judged at all, and the catalog's second opinion."""
    case_id: str
    cells: list[OpsCell] = field(default_factory=list)
    skipped: str | None = None  # the float64 reference (or the case itself) failed: nothing to judge against
    disagreement: dict | None = None  # the catalog's expected output departs from the float64 judge
    unrun: bool = False  # not started: the time budget was spent
    duration_s: float = 0.0
    programs: float = 0.0  # its share of the programs it ran in (1/N of a program of N cases; batch.py)
    alone: int = 0  # times it ran as a one-op model of its own


def run_case(case: Case, config: SweepConfig, reg, work: Path) -> tuple[CaseOutcome, list[tuple]]:
    """One case checked on every backend that takes its kind, at every precision; and the repros its failing cells
    want (verdict.write_repros)."""
    t0 = time.perf_counter()
    outcome = CaseOutcome(case.case_id)
    env = worker_env()
    try:
        grid = _grid(case, config, reg, work)  # the case as a model: its files refused by the loader are a skip
        results, ref = run_grid(grid, config.timeout, env, None)
    except (UsageError, ReferenceFailed) as e:  # or its own float64 run failed: nothing to judge
        outcome.skipped = str(e)
        outcome.duration_s = time.perf_counter() - t0
        return outcome, []
    judged = question_judge(grid, results, ref, env, config.timeout, None)
    ev = Evidence(grid, results, ref, judged, env, config.timeout)
    rules = verdict.OPS if case.integer_valued else verdict.CHECK
    cells = judge_run(ev, verdict.RULES[rules])
    outcome.disagreement = verdict.expected_disagreement(case, ref.outputs)
    saved = {"rules": rules, **evidence.save(ev)}
    outcome.cells = [ops_cell(case, c, results[k], saved) for c, k in zip(cells, grid.cells)]
    requests = [verdict.repro_request(case, grid, k, oc, c.baseline_metrics, results[k], ref,
                                      Path(config.repro_dir))
                for oc, c, k in zip(outcome.cells, cells, grid.cells)
                if config.repro_dir and oc.status in REPRO_STATUSES]
    outcome.duration_s = time.perf_counter() - t0
    return outcome, requests


def _grid(case: Case, config: SweepConfig, reg, work: Path) -> Grid:
    """The case as a check grid: the backends that take its kind, every precision, the case's own shape variants."""
    folder = work / safe_name(case.case_id)
    folder.mkdir(parents=True, exist_ok=True)
    model, inputs = write_case(case, folder)
    kind = "torch" if model.endswith(".py") else "onnx"
    backends = [b for b in config.backends if kind in reg.cls(b).kinds]
    if not backends:
        raise UsageError(f"no backend of {', '.join(config.backends)} takes {kind} models")
    return make_grid(model, reg, config.grid(backends, config.precisions, inputs))


def ops_cell(case: Case, c: Cell, r: JobResult, judged_from: dict | None = None) -> OpsCell:
    """A judged cell as the sweep reports it: the same cell with the case it belongs to, the runtime's support state
    and the evidence it was judged from; of its info the small facts."""
    cell = OpsCell.judged(case, c, info=_kept_info(c.info), judged_from=judged_from)
    cell.support, cell.support_detail = verdict.support(c, r)
    return cell


def _kept_info(info: dict) -> dict:
    """What of a cell's info the sweep's JSON keeps: the small facts, not the worker's log or traceback in full."""
    keep = {k: v for k, v in info.items() if k in ("support", "onnx_graph", "traceback", "log_tail", "worker", BLAMED,
                                                   BLAMED_AT, DEPARTS)}
    for k in ("traceback", "log_tail"):
        if isinstance(keep.get(k), str):
            keep[k] = keep[k][-1500:]
    return keep


def safe_name(name: str) -> str:
    """A case id as a folder name."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)[:120]

