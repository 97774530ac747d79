"""The fuzzer: random valid graphs drawn from the ops catalog's ops (vocab.py, generate.py), written as torch programs
and ONNX graphs (emit.py), each judged by check's rule against float64 through the op sweep's own run_case
(oracle.py: baselines at the same dtype, ill-conditioned graphs discarded, flips for integer outputs), every failing
cell minimized by delta debugging (minimize.py) and deduplicated by a semantic signature, with ops' standalone repro
and report (campaign.py). A campaign runs in batches here or on Ray (analysis/distribute.py)."""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fpdiff.analysis.fuzz.campaign import BatchAnswer, Found, FuzzConfig, GraphRecord, run_batch
from fpdiff.analysis.fuzz.graph import ALL_FORMS, FORMS, QUANTIZED_FORMS, written_as
from fpdiff.analysis.fuzz.result import LOST, UNRUN, FuzzResult
from fpdiff.analysis.ops import OP_TIMEOUT, sweep_config
from fpdiff.analysis.ops.quantized import quantizes
from fpdiff.analysis.options import RunOptions
from fpdiff.backends import registry
from fpdiff.core.errors import UsageError
from fpdiff.core.versions import report_versions
from fpdiff.judging.run import worker_env
from fpdiff.runtime import external, rundir

__all__ = ["DEFAULT_BACKENDS", "DEFAULT_PRECISIONS", "FuzzOptions", "FuzzResult", "SHARED_DEFAULTS", "fuzz"]

# the compilers and runtimes where ops meet and get fused, rewritten and re-laid-out; torch eager is the baseline
DEFAULT_BACKENDS = ("inductor", "ort", "openvino", "iree")
# fp32 is where a rewrite that loses digits shows against float64; fp16 is where fusions overflow and kernels get
# substituted. bf16 is asked for by name.
DEFAULT_PRECISIONS = ("fp32", "fp16")
# Graphs per batch: a batch shares one set of workers and is the unit Ray schedules, times out and loses. A worker
# start (a fresh interpreter importing torch and the backend) costs ~2.2 s, and a warm ORT cell of a small graph
# ~15 ms: at 8 graphs a batch the starts were 90% of an ORT campaign's time (3.3 graphs/s); 32 spreads a start
# over enough graphs that the cells dominate, while a lost batch still costs little of a long campaign.
BATCH = 32
DEFAULT_GRAPHS = 50  # without --graphs or --time: a few minutes on the default backends
# Worker starts and minimizations a batch's Ray limit allows for beyond its cells' own timeouts
BATCH_EXTRA_S = 900.0

Progress = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class FuzzOptions:
    """fuzz's own options (what every analysis shares is RunOptions): `graphs` graphs from the seed (or as many as
    `time_budget` seconds allow), each judged on every backend at every precision; `ops`: case-insensitive globs over
    the vocabulary's op names and catalog names; `forms`: torch and/or onnx (None: those the backends take); `ray`: a
    Ray address ("local" starts one); `repro_dir`: where findings' repros go (None: none)."""
    backends: Sequence[str] = DEFAULT_BACKENDS
    precisions: Sequence[str] = DEFAULT_PRECISIONS
    graphs: int | None = None
    time_budget: float | None = None
    ops: Sequence[str] | None = None
    min_ops: int = 2
    max_ops: int = 6
    forms: Sequence[str] | None = None
    ray: str | None = None
    repro_dir: str | None = "fpdiff-out/fuzz"
    recheck: bool = True
    batch: int = BATCH
    minimize_budget: int | None = None
    resume: str | None = None  # a cut run's JSON report: what it judged is kept, the rest is run


# No compile cache unless one is named: every graph is new, so a cache is only written, never read, and an hour's
# campaign on four backends wrote gigabytes of artifacts into it.
SHARED_DEFAULTS = {"timeout": OP_TIMEOUT, "cache_dir": False}


@rundir.scoped
def fuzz(options: FuzzOptions | None = None, shared: RunOptions | None = None) -> FuzzResult:
    """A fuzz campaign."""
    from fpdiff.analysis import distribute
    from fpdiff.analysis.fuzz import campaign
    t0 = time.perf_counter()
    o, shared = options or FuzzOptions(), (shared or RunOptions(**SHARED_DEFAULTS)).ready()
    reg = shared.registry
    sweep = sweep_config(shared, o.backends, o.precisions, o.repro_dir, o.recheck)
    _check_sizes(o.graphs, o.time_budget, o.min_ops, o.max_ops, o.batch, o.minimize_budget)
    distribute.check_address(o.ray)
    chosen = _forms(reg, o.backends, o.forms)
    _check_ops(o.ops)
    config = FuzzConfig(sweep, tuple(o.ops) if o.ops else None, o.min_ops, o.max_ops, chosen,
                        o.minimize_budget or campaign.MINIMIZE_BUDGET, shared.seed)
    if o.time_budget is not None:
        config = dataclasses.replace(config, sweep=dataclasses.replace(
            sweep, deadline=time.time() + o.time_budget - (time.perf_counter() - t0)))
    total = o.graphs if o.graphs is not None else (None if o.time_budget is not None else DEFAULT_GRAPHS)
    before = resumed(o.resume, o, shared.seed) if o.resume else BatchAnswer([], [])
    start = max((r.index for r in before.records), default=-1) + 1
    answers = [before, *_run(config, total, o.batch, o.ray, shared.progress, start)]
    modules = [m for b in o.backends for m in reg.cls(b).requires]
    records, found = _merge(answers)
    found = _root_causes(found, config)
    return FuzzResult(records=records, findings=found, backends=list(o.backends), precisions=list(o.precisions),
                      seed=shared.seed, versions=report_versions(modules), duration_s=time.perf_counter() - t0,
                      ray=o.ray, selection=_selection(o), resumed=len(before.records))


def _check_sizes(graphs, time_budget, min_ops, max_ops, batch, minimize_budget) -> None:
    """Numbers that would run nothing, or nothing sensible, said before any work."""
    if time_budget is not None and not time_budget > 0:
        raise UsageError(f"--time must be positive, got {time_budget:g} s")
    if graphs is not None and graphs < 1:
        raise UsageError(f"--graphs must be at least 1, got {graphs}")
    if min_ops < 1 or max_ops < min_ops:
        raise UsageError(f"--max-ops must be at least --min-ops (>= 1), got {min_ops}..{max_ops}")
    if batch < 1:
        raise UsageError(f"the batch size must be at least 1, got {batch}")
    if minimize_budget is not None and minimize_budget < 1:
        raise UsageError(f"the minimization budget must be at least 1 probe, got {minimize_budget}")


def _forms(reg, backends: Sequence[str], forms: Sequence[str] | None) -> tuple[str, ...]:
    """The graph forms to write: torch programs reach every backend (the ONNX ones through export), ONNX graphs
    only the backends that take ONNX; a quantized form only backends that quantize its kind; a form no chosen
    backend takes is left out."""
    kinds = {k for b in backends for k in reg.cls(b).kinds}
    asked = tuple(forms) if forms else FORMS
    for f in asked:
        if f not in ALL_FORMS:
            raise UsageError(f"unknown graph form {f!r}; the forms: {', '.join(ALL_FORMS)}")
    usable = tuple(f for f in asked if written_as(f) in kinds and (f not in QUANTIZED_FORMS or any(
        quantizes(reg, b, written_as(f)) for b in backends)))
    if not usable:
        raise UsageError(f"no backend of {', '.join(backends)} takes {' or '.join(asked)} graphs")
    return usable


def _check_ops(ops: Sequence[str] | None) -> None:
    """An op pattern matching no vocabulary op is a one-line error naming the closest (generate.select_ops does it)."""
    if ops:
        from fpdiff.analysis.fuzz import generate
        generate.select_ops(list(ops))


def resumed(path: str, o: FuzzOptions, seed: int) -> BatchAnswer:
    """A cut campaign's graphs and findings (its JSON report), held to this run's backends, precisions, seed and
    selection: graph i of a campaign is the same graph only under the same seed and options."""
    from fpdiff.core.jsonfile import read
    data = read(path, "a fuzz report (fpdiff fuzz --json RUN.json)")
    if not isinstance(data, dict) or data.get("kind") != "fuzz" or not isinstance(data.get("records"), list):
        raise UsageError(f"--resume {path}: not a fuzz report; give the file fpdiff fuzz --json wrote")
    mine = {"backends": list(o.backends), "precisions": list(o.precisions), "seed": seed, **_selection(o)}
    theirs = {k: data.get(k, mine[k]) for k in mine}
    if theirs != mine:
        diff = ", ".join(f"{k} {theirs[k]} (this run: {mine[k]})" for k in mine if theirs[k] != mine[k])
        raise UsageError(f"--resume {path}: a campaign of other settings: {diff}")
    keep = {f.name for f in dataclasses.fields(Found)} - {"sample"}
    try:
        records = [GraphRecord(**r) for r in data["records"] if r.get("outcome") != UNRUN]
        found = [Found(**{k: v for k, v in f.items() if k in keep}) for f in data.get("findings", [])]
    except TypeError as e:
        raise UsageError(f"--resume {path}: its records do not read as this fpdiff's ({e})") from None
    return BatchAnswer(records, found)


def _selection(o: FuzzOptions) -> dict:
    """The options that decide which graph index i is (the report records them; --resume holds them equal)."""
    return {"ops": list(o.ops) if o.ops else None, "forms": list(o.forms) if o.forms else None,
            "min_ops": o.min_ops, "max_ops": o.max_ops}


def _run(config: FuzzConfig, total: int | None, batch: int, ray: str | None,
         progress: Progress | None, start: int = 0) -> list[BatchAnswer]:
    """Batches of graph indices, here or on Ray, until `total` graphs or the deadline."""
    t0, seen, found = time.perf_counter(), [0], [0]

    def tick(rec: GraphRecord, batch_found) -> None:
        seen[0] += 1
        if progress:
            rate = 60.0 * seen[0] / max(time.perf_counter() - t0, 1e-9)
            progress(f"{seen[0]} graphs, {rate:.1f}/min, {len(batch_found) + found[0]} findings", seen[0], total)

    # here the workers stay warm from batch to batch (a batch is then only the unit of the in-batch dedup); on Ray
    # each task starts its own
    with external.shared(worker_env()) if ray is None else contextlib.nullcontext():
        return _rounds(config, total, batch, ray, tick, found, start)


def _rounds(config: FuzzConfig, total: int | None, batch: int, ray: str | None, tick, found: list[int],
            start: int = 0) -> list[BatchAnswer]:
    """Rounds of batches (one here, one per CPU on Ray) from graph `start` until `total` graphs are made or the
    deadline passes."""
    from fpdiff.analysis import distribute
    answers: list[BatchAnswer] = []
    per_round = 1 if ray is None else max(1, os.cpu_count() or 1)
    while total is None or start < total:
        if config.sweep.deadline is not None and time.time() > config.sweep.deadline:
            break
        end = start + batch * per_round if total is None else min(total, start + batch * per_round)
        batches = [list(range(i, min(end, i + batch))) for i in range(start, end, batch)]
        if ray is None:
            got = [run_batch(b, config, tick) for b in batches]
        else:
            work = functools.partial(run_batch, config=config)
            limit = batch * (len(config.sweep.backends) * len(config.sweep.precisions) + 2) * config.sweep.timeout \
                + BATCH_EXTRA_S
            got = [_lost(b, a) if isinstance(a, distribute.BatchFailure) else a
                   for b, a in zip(batches, distribute.run_batches(batches, work, address=ray, timeout=limit))]
            for a in got:
                for r in a.records:
                    tick(r, [])
        answers += got
        found[0] += sum(len(a.found) for a in got)
        start = end
    return answers


def _root_causes(found: list[Found], config: FuzzConfig) -> list[Found]:
    """Findings of one backend, precision and verdict class merged where one's culprit op fails alone on the
    other's values too (dedup.py), run here after every batch (Ray's included) is back."""
    from fpdiff.analysis.fuzz import dedup, oracle
    if len({(f.backend, f.precision, f.status_class) for f in found}) == len(found):
        return found  # no two findings share a cell: nothing to merge, nothing to run
    with rundir.run_directory(), external.shared(worker_env()):
        reg = registry(config.sweep.plugins)
        work = rundir.mkdtemp(prefix="fpdiff-fuzz-dedup-")
        return dedup.root_causes(found, lambda f: oracle.probe_class(f.backend, f.precision, f.status_class,
                                                                      config.sweep, reg, work))


def _lost(indices: list[int], failure) -> BatchAnswer:
    """A batch Ray lost (its task crashed or timed out): its graphs recorded so, never retried."""
    return BatchAnswer([GraphRecord(i, 0, None, None, [], "", LOST, discard=f"its batch {failure.kind}: "
                                    f"{failure.message}") for i in indices], [])


def _merge(answers: list[BatchAnswer]) -> tuple[list[GraphRecord], list]:
    """Records in index order; findings of equal signature merged (hits summed), in order of first appearance."""
    records = sorted((r for a in answers for r in a.records), key=lambda r: r.index)
    merged: dict[str, object] = {}
    for a in answers:
        for f in a.found:
            if f.signature in merged:
                merged[f.signature].hits += f.hits
                merged[f.signature].matched += f.matched
            else:
                merged[f.signature] = f
    return records, list(merged.values())
