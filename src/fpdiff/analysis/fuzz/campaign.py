"""A campaign's unit of work: a batch of graph seeds, generated, judged (oracle.py), every failing cell minimized
(minimize.py) and given a signature, repro and report, all in one shared set of workers. A batch is plain data in
and out, so it runs here or as a Ray task alike, and the same seeds give the same findings either way."""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fpdiff.analysis.fuzz import dedup, oracle
from fpdiff.analysis.fuzz.graph import FORMS, Sample
from fpdiff.analysis.ops import repro as ops_repro
from fpdiff.analysis.ops import verdict as ops_verdict
from fpdiff.analysis.ops.batch import run_case
from fpdiff.analysis.ops.case import OpsCell
from fpdiff.analysis.ops.sweep import SweepConfig
from fpdiff.backends import registry
from fpdiff.core.errors import QUANTIZE, UsageError
from fpdiff.core.status import Status
from fpdiff.judging.run import worker_env
from fpdiff.runtime import external, rundir

# Probes a minimization may spend: ddmin over 6 ops needs ~15-25, shape and value steps ~10-20 more; at 1-5 s a
# probe, 60 keeps one finding's minimization near a minute or two.
MINIMIZE_BUDGET = 60


@dataclass(frozen=True)
class FuzzConfig:
    """A campaign's settings besides its seeds: plain values, so a batch can run on another host."""
    sweep: SweepConfig
    ops: tuple[str, ...] | None = None
    min_ops: int = 2
    max_ops: int = 6
    forms: tuple[str, ...] = FORMS
    minimize_budget: int = MINIMIZE_BUDGET
    seed: int = 0


@dataclass
class GraphRecord:
    """One generated graph: what it was and what became of it."""
    index: int
    seed: int
    id: str | None
    form: str | None
    ops: list[str]
    description: str
    outcome: str  # oracle.PASS / DISCARDED / FAILING, or "unrun" (the time budget was spent)
    discard: str | None = None
    statuses: dict[str, str] = field(default_factory=dict)
    duration_s: float = 0.0
    # what its cells were judged from (judging/evidence.py's form, with the rules' name): `fpdiff rejudge` reads it
    evidence: dict | None = None


@dataclass
class Found:
    """A finding as one batch saw it: the minimized graph of a failing cell and the graphs that hit it."""
    signature: str
    backend: str
    precision: str
    status: str
    status_class: str
    ops: list[str]
    variant: str
    reason: str
    metrics: dict | None
    form: str
    graph: dict  # the minimized graph (Graph.as_dict()) and its id, with the original's
    minimization: dict  # {"ops_before", "ops_after", "probes", "seconds", "steps"}
    hits: list[str] = field(default_factory=list)  # ids of the graphs whose failing cell minimized to it
    matched: list[str] = field(default_factory=list)  # ids of graphs counted by containing its op sequence
    repro: dict | None = None
    report: str | None = None
    sample: bytes = field(default=b"", repr=False)
    merged: list[str] = field(default_factory=list)  # signatures of one root cause merged into it (dedup.py)
    # the minimized graph's status in each shape variant on the failing cell (static, dynamic, each mix): the
    # variants judged against each other, where SEEDS #2's signature shows (right at the ends, wrong in a mix)
    shapes: dict = field(default_factory=dict)  # the minimized Sample (Sample.to_bytes), for the repro

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("sample")
        d["hit_count"] = len(self.hits) + len(self.matched)
        return d


@dataclass
class BatchAnswer:
    records: list[GraphRecord]
    found: list[Found]


def graph_seed(seed: int, index: int) -> int:
    """The seed of the campaign's graph `index`: well mixed, stable across hosts and Python versions."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint32)[0])


def run_batch(indices: Sequence[int], config: FuzzConfig,
              progress: Callable[[GraphRecord, list[Found]], None] | None = None) -> BatchAnswer:
    """Every graph of the batch in order, in one shared set of workers; a graph that breaks costs that graph."""
    answer = BatchAnswer([], [])
    with rundir.run_directory(), external.shared(worker_env()):
        reg = registry(config.sweep.plugins)
        work = rundir.mkdtemp(prefix="fpdiff-fuzz-")
        for i in indices:
            if config.sweep.deadline is not None and time.time() > config.sweep.deadline:
                answer.records.append(GraphRecord(i, graph_seed(config.seed, i), None, None, [], "", "unrun"))
                continue
            answer.records.append(_guarded(i, config, reg, work, answer.found))
            if progress:
                progress(answer.records[-1], answer.found)
    return answer


INTERNAL = "fpdiff's own error"  # a discard reason: the graph broke fpdiff itself, said with its message


def _guarded(index: int, config: FuzzConfig, reg, work: Path, found: list[Found]) -> GraphRecord:
    """One graph; an error of fpdiff's own code on it (not a backend's: those are cells) costs that graph, counted
    and said as a discard reason with its message, never the campaign."""
    try:
        return _one(index, config, reg, work, found)
    except UsageError:
        raise  # the campaign's own settings: every graph would fail alike
    except Exception as e:  # noqa: BLE001  (any bug of fpdiff's on one graph)
        return GraphRecord(index, graph_seed(config.seed, index), None, None, [], "", oracle.DISCARDED,
                           discard=f"{INTERNAL}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")


def _one(index: int, config: FuzzConfig, reg, work: Path, found: list[Found]) -> GraphRecord:
    """Generate, judge, and turn each failing cell into a finding (a new minimized one, or a hit on a known one)."""
    from fpdiff.analysis.fuzz import generate
    seed = graph_seed(config.seed, index)
    t0 = time.perf_counter()
    made = generate.generate(seed, ops=list(config.ops) if config.ops else None, min_ops=config.min_ops,
                             max_ops=config.max_ops, forms=config.forms)
    if not isinstance(made, Sample):
        return GraphRecord(index, seed, None, None, [], "", oracle.DISCARDED, discard=made.reason,
                           duration_s=time.perf_counter() - t0)
    desc = generate.describe(made)
    v, outcome, _ = oracle.judge(made, dataclasses.replace(config.sweep, repro_dir=None, recheck=False), reg, work)
    rec = GraphRecord(index, seed, made.id, made.form, made.graph.ops(), desc, v.outcome, v.discard, v.statuses,
                      evidence=next((c.judged_from for c in outcome.cells if c.judged_from is not None), None))
    for f in _distinct(v.failures):
        known = _known(found, f, made.graph.ops())
        # a graph holding a known finding's ops counts on it only when cut down to them it fails the same way
        if known is not None and dedup.holds(made, known.ops, oracle.probe_for(f, config.sweep, reg, work)):
            known.matched.append(made.id)
            continue
        new = _finding(made, f, config, reg, work)
        same = next((x for x in found if x.signature == new.signature), None)
        if same is not None:
            same.hits.append(made.id)
        else:
            found.append(new)
    rec.duration_s = time.perf_counter() - t0
    return rec


def _distinct(failures: list[OpsCell]) -> list[OpsCell]:
    """One failure per backend, precision and verdict class: a graph failing the same way in its static and its
    dynamic-shape cells is one hit, minimized once."""
    seen: dict[tuple, OpsCell] = {}
    for f in failures:
        seen.setdefault((f.backend, f.precision, oracle.status_class(f)), f)
    return list(seen.values())


def _known(found: list[Found], f: OpsCell, ops: list[str]) -> Found | None:
    """A finding this failure is counted on without minimizing again: the same backend, precision and verdict class,
    and the graph holds the finding's minimized op sequence in order (a graph of a known bug's ops failing the known
    way). Minimizing every such graph would spend the campaign on one bug."""
    for x in found:
        if (x.backend, x.precision, x.status_class) == (f.backend, f.precision, oracle.status_class(f)) \
                and _in_order(x.ops, ops):
            return x
    return None


def _in_order(needle: list[str], hay: list[str]) -> bool:
    it = iter(hay)
    return all(any(op == h for h in it) for op in needle)


def _finding(sample: Sample, f: OpsCell, config: FuzzConfig, reg, work: Path) -> Found:
    """The failing cell minimized (a hang is not: each probe would wait the whole timeout), its signature, and the
    minimized graph's repro and report."""
    from fpdiff.analysis.fuzz import minimize
    t0 = time.perf_counter()
    if f.status == Status.TIMEOUT:
        small, probes, steps, matters = sample, 0, ["a hang is not minimized: each probe would wait the timeout"], []
    else:
        m = minimize.minimize(sample, oracle.probe_for(f, config.sweep, reg, work), budget=config.minimize_budget)
        small, probes, steps, matters = m.sample, m.probes, list(m.steps), list(m.matters)
    seconds = time.perf_counter() - t0
    variant = variant_of(matters)
    cell, repro, report = _repro(small, f, variant, config, reg, work)
    if cell is not None and cell.mixed_only:
        variant = "+".join([*(v for v in variant.split("+") if v != "plain"), ops_verdict.MIXED_ONLY])
    sig = _signature(f, small.graph.ops(), variant)
    return Found(sig, f.backend, f.precision, f.status, oracle.status_class(f), small.graph.ops(), variant,
                 cell.reason if cell else f.reason, cell.metrics if cell else f.metrics, small.form,
                 {"minimized": small.graph.as_dict(), "id": small.id, "original": sample.id},
                 {"ops_before": len(sample.graph.ops()), "ops_after": len(small.graph.ops()), "probes": probes,
                  "seconds": round(seconds, 2), "steps": steps, "matters": matters},
                 hits=[sample.id], repro=repro, report=report, sample=small.to_bytes(),
                 shapes=cell.shapes if cell else {})


def variant_of(matters: list[str]) -> str:
    """The variant a signature names: the features minimization could not remove, without their sizes ("odd-size
    3" and "odd-size 5" of one bug are one signature; the size stays in the minimized graph)."""
    import re
    return "+".join(dict.fromkeys(re.sub(r"\s+\d+$", "", m) for m in matters)) or "plain"


@dataclass
class _Judged:
    """The minimized graph's failing cell as judged again: what the finding reports of it."""
    reason: str
    metrics: dict | None
    mixed_only: bool = False  # wrong only where static and dynamic dims mix (oracle.mixed_only)
    shapes: dict = field(default_factory=dict)  # shape variant -> status of the minimized graph on the failing cell


def _signature(f: OpsCell, ops: list[str], variant: str) -> str:
    """The semantic signature: backend (or the exporter the failure is pinned on), precision, verdict class,
    the minimized op sequence, the variant that matters. Safe as a folder name."""
    import re
    # a quantizer's error is one bug whichever backend would have run its graph: named by the quantizer
    who = ops_repro.culprit(f) if f.stage == QUANTIZE else f.backend
    parts = (who, f.precision, oracle.status_class(f), ">".join(ops), variant)
    return "__".join(re.sub(r"[^A-Za-z0-9.+>:-]", "_", p).replace(">", "-").replace(":", "-") for p in parts)


# why a finding has the minimized graph and no standalone bundle: a graph each backend quantizes is remade by the
# backend's own quantizer in fpdiff's worker, and the bundle of that quantized program is not written yet
NO_BUNDLE = ("no standalone bundle for a graph each backend's quantizer makes: graph.npz is the minimized graph "
             "(fuzz.graph.Sample.from_bytes), judged again by fuzz.oracle.judge")


def _graph_only(small: Sample, cell: OpsCell, root: Path) -> dict:
    """The minimized graph saved where its bundle would be, and why there is no bundle."""
    folder = root / ops_repro.signature(cell) / ops_verdict.repro_name(cell)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "graph.npz").write_bytes(small.to_bytes())
    return {"path": None, "retriggers": None, "graph": str(folder / "graph.npz"), "error": NO_BUNDLE}


def _repro(small: Sample, f: OpsCell, variant: str, config: FuzzConfig, reg, work: Path
           ) -> tuple[_Judged | None, dict | None, str | None]:
    """The minimized graph judged once more on the failing cell with its repro written and rechecked, and the
    ready-to-file report beside it; (None, why, None) when the minimized graph no longer fails there."""
    root = config.sweep.repro_dir
    narrow = dataclasses.replace(oracle.narrowed(config.sweep, f.backend, f.precision), repro_dir=root)
    case = oracle.case_of(small, shown=variant)
    outcome, requests = run_case(case, narrow, reg, work)
    cells = [c for c in outcome.cells if oracle.status_class(c) == oracle.status_class(f)]
    if not cells:
        return None, {"path": None, "retriggers": None, "error": "the minimized graph passed when judged again"}, None
    cell = cells[0]
    judged = _Judged(cell.reason, cell.metrics, oracle.mixed_only(outcome.cells, oracle.status_class(f)),
                     {c.shape_variant: str(c.status) for c in outcome.cells})
    if not root:
        return judged, None, None
    mine = [r for r in requests if r[2] is cell]
    ops_verdict.write_repros(mine, Path(root))
    if config.sweep.recheck:
        ops_verdict.recheck_repros([cell])
    if not mine and not (cell.repro and cell.repro.get("path")):  # no bundle: the graph itself, to judge again
        return judged, _graph_only(small, cell, Path(root)), None
    report = None
    if cell.repro and cell.repro.get("path"):
        from fpdiff.core.versions import report_versions
        bundle = Path(cell.repro["path"]).parent
        versions = cell.info.get("worker", {}).get("versions") or report_versions(
            ["onnx", *reg.cls(f.backend).requires])
        (bundle / "graph.npz").write_bytes(small.to_bytes())
        report = str(bundle / "REPORT.md")
        Path(report).write_text(ops_repro.upstream_report(cell, bundle, versions))
    return judged, cell.repro, report
