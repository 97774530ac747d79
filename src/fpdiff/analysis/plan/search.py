"""A plan and how it is found: candidate ops ranked by evidence, trials of keep-sets, the smallest set that passes."""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

from fpdiff.analysis.base import Result
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.jsonfile import dump
from fpdiff.core.status import Status
from fpdiff.model.autocast import fp32_names

# 2: a plan's ops are those of the model as cast to its precision (1: of the fp32 export, a different program
# wherever the model's code depends on its dtype), so a format-1 plan names other ops and is refused as such.
PLAN_FORMAT = 2
# The field's prior for what a low precision hurts, used only to order candidates nobody has evidence against: the
# ops torch's autocast runs in fp32 on CPU or CUDA and their ONNX op types (model/autocast.py holds those lists), plus
# ops practice treats as sensitive though autocast leaves them to their input dtype (division, square root,
# erf/tanh/sigmoid, batch/instance norm and mean/var/std statistics), and the spellings decomposed graphs use.
PRIOR = fp32_names() | {
    "div", "sqrt", "erf", "tanh", "sigmoid", "batch_norm", "mean", "var", "std", "_softmax", "_log_softmax",
    "native_group_norm", "Div", "Sqrt", "Erf", "Tanh", "Sigmoid", "BatchNormalization", "InstanceNormalization",
    "ReduceMean"}


@dataclass
class Unit:
    """One op the plan can keep in fp32."""
    node: str
    op: str
    module: str = ""
    source: str = ""
    flops: float = 0.0  # rough cost, for the share of compute left at the low precision


@dataclass
class Trial:
    keep: list[str]
    error: float  # relative L2 of the outputs vs float64 (inf: non-finite or the backend failed)
    passed: bool
    status: Status = Status.OK  # ok, or the job's failure on the backend (unsupported, error, crash, timeout)
    seconds: float = 0.0
    reason: str = ""  # what the backend said when it did not run the keep-set, or why the verifier failed it
    # the keep-set's error where the precision is really computed (Verification), when the plan's backend computes
    # it wider and passed the set (inf: the verifier did not run it); None: not run there
    verifier_error: float | None = None

    def __post_init__(self) -> None:
        self.status, said = job_status(self.status)  # plans saved before the reason had its own field
        self.reason = self.reason or said


@dataclass
class KeptOp:
    """An op the plan keeps in fp32, and the evidence for keeping it."""
    node: str
    op: str
    module: str = ""
    source: str = ""
    why: list[str] = field(default_factory=list)


@dataclass
class Verification:
    """Where the plan's precision was really computed: the plan's backend computes it wider (its own cell at that
    precision is dtype-changed, as check judges it, or did not run; `wider` says which), so each keep-set that
    passed there ran again on `backend` at the precision and passed only if it met the tolerance there too."""
    backend: str
    precision: str
    wider: str
    pure_error: float | None = None  # the pure precision there (None: it failed on the plan's backend first)
    error: float | None = None  # the plan there


@dataclass
class AutocastRemedy:
    """Autocast at the plan's low dtype on the plan's backend (its own amp cell), judged by the plan's tolerance:
    the remedy to try before a plan."""
    precision: str
    status: str | None = None  # the job's failure when the backend did not run autocast (then no error)
    reason: str | None = None
    error: float | None = None
    passed: bool = False
    ms: float | None = None  # the backend's amp run, beside fp32_ms (its run of the program with every op fp32)
    fp32_ms: float | None = None
    backend: str | None = None  # whose amp cell this is


@dataclass
class Speed:
    """The planned program against fp32 and the pure low precision, each timed in the backend's own prepared run."""
    where: str  # the backend and device that ran them
    ms: dict[str, float]
    plan_vs_fp32: float | None
    plan_vs_pure: float | None  # None: that program did not run (see refused)
    refused: dict[str, str] = field(default_factory=dict)  # program -> the job's status and reason


@dataclass
class ExportRun:
    """An exported file run on a backend, judged by the plan's tolerance against the plan's float64 outputs."""
    backend: str
    precision: str  # the precision the job ran at: fp32 for a file taking fp32, the plan's for a typed one
    error: float | None = None  # None: it did not run (reason)
    passed: bool = False
    reason: str | None = None  # the job's failure
    op_dtypes: dict[str, int] | None = None  # the ops the backend counted, by the dtype they computed in


@dataclass
class Export:
    """The plan written for one target (`--export TARGET=PATH`), read back, and run again where the target's
    numbers can be computed: what a user ships, verified or said why not."""
    target: str
    path: str
    written: bool = False
    verified: bool = False  # written, its read-back check held, and every run met the tolerance
    reason: str | None = None  # why it was not written, checked or verified
    tolerance: float | None = None
    op_dtypes: dict[str, int] = field(default_factory=dict)  # the file's own ops by the dtype it computes them in
    check: str | None = None  # what reading the file back showed (the kept ops' dtypes, every value typed)
    runs: list[ExportRun] = field(default_factory=list)

    @property
    def backend(self) -> str | None:
        """Where it was verified: the first run's backend."""
        return self.runs[0].backend if self.runs else None

    @property
    def error(self) -> float | None:
        """The largest error of its runs (None: none ran)."""
        errs = [r.error for r in self.runs if r.error is not None]
        return max(errs) if errs else None


def _compact(part) -> dict | None:
    """A plan part as JSON: its fields without the unset ones, so each part shows only what was measured."""
    return None if part is None else {k: v for k, v in asdict(part).items() if v is not None}


@dataclass
class Plan(Result):
    kind: ClassVar[str] = "plan"
    model: str
    precision: str
    backend: str
    tolerance: float
    graph: str  # digest of the units, so a plan is never applied to another model
    keep: list[KeptOp] = field(default_factory=list)
    error: float | None = None  # the final verified end-to-end error
    passed: bool = False
    units: int = 0
    low_fraction: float = 0.0  # share of the model's flops left at the low precision
    evaluations: int = 0  # end-to-end runs of mixed models (pure and all-fp32 included)
    screened: int = 0  # a quantized plan's trials run on its exact float64 emulation before any on the backend
    analyses: list[str] = field(default_factory=list)  # evidence passes run before the search
    seconds: float = 0.0
    pure_error: float | None = None
    pure_status: Status = Status.OK  # or the job's failure on the backend at the pure precision
    pure_reason: str = ""
    fp32_error: float | None = None
    trials: list[Trial] = field(default_factory=list)
    autocast: AutocastRemedy | None = None  # when the pure precision fails
    speed: Speed | None = None
    exports: list[Export] = field(default_factory=list)  # one per --export target, in the order asked
    verification: Verification | None = None  # None: the plan's backend computes the precision; its trials verify
    message: str = ""
    backup: str = ""  # a quantized format's plan: what its layers become (float, int8)

    @property
    def kept(self) -> set[str]:
        return {k.node for k in self.keep}

    @property
    def export(self) -> Export | None:
        """The ONNX export (`export_onnx=`, `--export onnx=`), for callers of the single export before targets."""
        return next((e for e in self.exports if e.target == "onnx"), None)

    def exit_code(self, strict: bool = False) -> int:
        """0: a verified plan and every export asked for verified; else 1."""
        return 0 if self.passed and all(e.verified for e in self.exports) else 1

    def as_dict(self) -> dict:
        d = {"kind": self.kind, **asdict(self)}
        d.update(autocast=_compact(self.autocast), speed=_compact(self.speed),
                 exports=[_export_dict(e) for e in self.exports], verification=_compact(self.verification),
                 fpdiff_plan=PLAN_FORMAT)
        return d

    def save(self, path: str | Path) -> None:
        dump(self.as_dict(), path)

    @classmethod
    def load(cls, path: str | Path) -> Plan:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"plan file not found: {path}" if not p.exists() else f"the plan must be a file: {path}")
        try:
            d = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{path} is not a plan (not JSON: {e})") from None
        if not isinstance(d, dict) or d.get("fpdiff_plan") != PLAN_FORMAT:
            raise UsageError(f"{path} is not an fpdiff plan (format {PLAN_FORMAT})")
        d.pop("fpdiff_plan")
        try:
            plan = _known(cls, d)
            plan.pure_status, said = job_status(plan.pure_status)
            plan.pure_reason = plan.pure_reason or said
            plan.keep = [KeptOp(**k) for k in plan.keep]
            plan.trials = [_known(Trial, t) for t in plan.trials]
            for name, part in (("autocast", AutocastRemedy), ("speed", Speed), ("verification", Verification)):
                if getattr(plan, name) is not None:
                    setattr(plan, name, _known(part, getattr(plan, name)))
            plan.exports = [_read_export(e) for e in (plan.exports or _single_export(d))]
        except (TypeError, ValueError) as e:  # a field missing or foreign: the file was edited or written elsewhere
            raise UsageError(f"{path} is not a readable fpdiff plan: {e}") from None
        return plan


def _export_dict(e: Export) -> dict:
    """An export as JSON: its measured fields, each run's too, with the backend and error it was verified by."""
    d = _compact(e)
    d["runs"] = [_compact(r) for r in e.runs]
    return {**d, "backend": e.backend, "error": e.error}


def _read_export(d: dict) -> Export:
    e = _known(Export, d)
    e.runs = [_known(ExportRun, r) for r in e.runs or []]
    return e


def _single_export(d: dict) -> list[dict]:
    """The ONNX export of a plan saved before export targets (one `export` record), as an `onnx` target."""
    old = d.get("export")
    if not isinstance(old, dict):
        return []
    run = {"backend": old["backend"], "precision": prec.FP32.name, "error": old.get("error"),
           "reason": old.get("reason"), "passed": bool(old.get("verified"))} if old.get("backend") else None
    return [{"target": "onnx", "path": old.get("path", ""), "written": True, "verified": bool(old.get("verified")),
             "reason": old.get("reason"), "runs": [run] if run else []}]


def _known(cls, d: dict):
    """A record from its JSON, fields this version no longer has left out (a measurement since dropped)."""
    if not isinstance(d, dict):
        raise TypeError(f"{cls.__name__} is not an object")
    known = {f.name for f in fields(cls)}  # a ClassVar (the result's kind) is no field
    return cls(**{k: v for k, v in d.items() if k in known})


def job_status(text: str) -> tuple[Status, str]:
    """(status, reason) of a saved status: plans before format 2's reason field wrote "unsupported: why"."""
    head, _, said = str(text).partition(": ")
    return Status(head), said


def graph_digest(units: list[Unit]) -> str:
    from fpdiff.sources import digest
    return digest(*[f"{u.node}:{u.op}" for u in units])[:16]


def check_matches(plan: Plan, units: list[Unit], label: str) -> None:
    """A plan made for another model (or another export of it) is refused, naming what differs."""
    names = {u.node: u.op for u in units}
    for k in plan.keep:
        if names.get(k.node) != k.op:
            have = names.get(k.node)
            raise UsageError(f"the plan was made for {plan.model}, not {label}: its op {k.node} ({k.op}) "
                             + ("is not in this model" if have is None else f"is {have} here"))
    if plan.graph != graph_digest(units):
        raise UsageError(f"the plan was made for {plan.model} ({plan.units} ops), not {label} ({len(units)} ops)")


Evaluate = Callable[[frozenset[str]], Trial]
Progress = Callable[[str, int, int | None], None]  # (what, evaluations so far, total when known)


class Search:
    """Keep-sets tried end to end; each answer remembered, so no set is evaluated twice."""

    def __init__(self, units: list[Unit], evaluate: Evaluate, tolerance: float,
                 progress: Progress | None = None) -> None:
        self.units = units
        self.names = [u.node for u in units]
        self._evaluate = evaluate
        self.tolerance = tolerance
        self.progress = progress
        self.trials: dict[frozenset[str], Trial] = {}

    def trial(self, keep) -> Trial:
        key = frozenset(keep)
        if key not in self.trials:
            self.trials[key] = self._evaluate(key)
            if self.progress is not None:
                t = self.trials[key]
                self.progress(f"trial {len(key)} of {len(self.names)} ops in fp32: "
                              + ("passes" if t.passed else "fails"), len(self.trials), None)
        return self.trials[key]

    def passes(self, keep) -> bool:
        return self.trial(keep).passed

    def known_to_fail(self, keep) -> bool:
        """A subset of a keep-set that ran and failed: keeping fewer ops in fp32 does not lower the error (the
        search's working assumption; where it is wrong the plan keeps an op more, and still verifies)."""
        key = frozenset(keep)
        return any(not t.passed and t.status == Status.OK and key <= k for k, t in self.trials.items())

    def run(self, ranked: list[str], strong: list[str], sources: list[str] = (),
            share: dict[str, float] | None = None, base: frozenset[str] = frozenset()) -> frozenset[str] | None:
        """The strongest evidence first (the ops where a problem starts, then every op with evidence); grow along
        the ranking until it passes; then drop what is not needed. With each op's first-order share of the
        error (`share`), the ranking is by the share's size and the first prefix tried is the one the shares
        predict. `base`: ops every keep-set after the pure one holds and no pruning drops (the value ranges
        forbid them the low precision).
        Any subset can come out (not only a prefix of the graph). None: even all-fp32 fails."""
        if self.passes(()):
            return frozenset()
        for first in (base, frozenset(sources) | base, frozenset(strong) | base):
            if first and self.passes(first):
                return self._prune(first, ranked, base)
        if not self.passes(frozenset(self.names)):
            return None
        if share:
            ranked = by_share(share, ranked + self.names)
            keep, start = base, self._predicted(ranked, share)
        else:
            keep, start = frozenset(strong) | base, 1
        order = [n for n in ranked if n not in keep] + [n for n in self.names if n not in keep and n not in ranked]
        return self._prune(self._grow(keep, order, start), ranked, base)

    def _predicted(self, order: list[str], share: dict[str, float]) -> int:
        """The shortest prefix of `order` whose shares' sizes, to first order, bring the pure error within the
        tolerance; the sizes are scaled to remove the whole error when every op is kept (they overlap: an op's
        rounding includes its inputs', and signed shares cancel where the sizes add)."""
        pure = self.trials[frozenset()].error
        finite = [abs(share.get(n, 0.0)) for n in order]
        must = sum(1 for x in finite if math.isinf(x))  # ops that alone go non-finite: kept before any other
        total = sum(x for x in finite if math.isfinite(x))
        if not math.isfinite(pure) or total <= 0:
            return max(must, 1)
        need = 1.0 - (self.tolerance / pure) ** 2  # the fraction of the squared error to take away (shares are of it)
        acc = 0.0
        for k, x in enumerate(finite, 1):
            acc += x if math.isfinite(x) else 0.0
            if k >= must and acc / total >= need:
                return k
        return len(order)

    def _grow(self, base: frozenset[str], order: list[str], start: int = 1) -> frozenset[str]:
        """The shortest passing prefix of `order` (kept with `base`), by galloping from `start`: steps that
        double away from it until the answer turns, then halving between the last fail and the first pass.
        `base` alone fails and `base` with all of `order` passes: both were tried."""
        lo, hi = 0, len(order)  # prefix lo fails, prefix hi passes
        k = min(max(start, lo + 1), hi)
        step = 1
        while hi - lo > 1:
            if self.passes(base | frozenset(order[:k])):
                hi = k
                k = max(hi - step, lo + 1) if lo == 0 else (lo + hi) // 2
            else:
                lo = k
                k = min(lo + step, hi - 1) if hi == len(order) else (lo + hi) // 2
            step *= 2
            k = min(max(k, lo + 1), hi - 1) if hi - lo > 1 else k
        return base | frozenset(order[:hi])

    def _prune(self, keep: frozenset[str], ranked: list[str], fixed: frozenset[str] = frozenset()) -> frozenset[str]:
        """Drop kept ops that are not needed (never one of `fixed`), weakest evidence first, in groups whose size
        doubles after each group dropped and halves after each group needed (group testing for an unknown share
        of needed ops: a spare set goes in a few trials, a set of needed ops in about one trial per op). A removal
        that only leaves a subset of a failed keep-set is not tried."""
        rank = {n: i for i, n in enumerate(ranked)}
        items = sorted(keep, key=lambda n: rank.get(n, len(rank) + self.names.index(n)))
        todo = [n for n in items[::-1] if n not in fixed]  # weakest first
        size = 1
        while todo:
            group = set(todo[:size])
            rest = [n for n in items if n not in group]
            if rest and not self.known_to_fail(rest) and self.passes(rest):
                items, todo, size = rest, todo[size:], size * 2
            elif size > 1:
                size //= 2
            else:
                todo = todo[1:]  # needed: stays
        return frozenset(items)


def by_share(share: dict[str, float], ranked: list[str]) -> list[str]:
    """Ops whose rounding moves the outputs, largest share first by size (the other evidence breaking ties), then
    the rest as ranked. By size, not sign: a share is an op's rounding projected on the pure error, and a negative
    one (it cancels part of that error) is still rounding the outputs carry once the other ops are kept; near a
    plan, where most ops are fp32, what dropping an op costs is that rounding's size, whatever its sign was."""
    pos = {n: i for i, n in enumerate(dict.fromkeys(ranked))}
    moves = sorted((n for n in pos if share.get(n, 0.0) != 0), key=lambda n: (-abs(share[n]), pos[n]))
    return list(dict.fromkeys(moves + list(pos)))


def settle(plan: Plan, search: Search, load: Plan | None, label: str,
           evidence: Callable[[], tuple]) -> tuple[frozenset[str] | None, dict[str, list[str]]]:
    """The keep-set and its reasons: a loaded plan as it is (re-verified by `finish`); no evidence gathered
    when the pure precision passes; else `evidence()` -> (ranked, strong, sources, why, analyses[, share[,
    forced]]) and a search, every keep-set of which holds the `forced` ops ({op: why}: the value ranges forbid
    them the low precision)."""
    if load is not None:
        check_matches(load, search.units, label)
        search.trial(())  # the pure precision, for the report
        return frozenset(load.kept), {k.node: k.why for k in load.keep}
    if search.passes(()):
        return frozenset(), {}
    ranked, strong, sources, why, plan.analyses, *more = evidence()
    share, forced = (more + [None, {}][len(more):])[:2]
    forced = {n: r for n, r in forced.items() if n in search.names}
    for n, reasons in forced.items():
        why[n] = list(dict.fromkeys(reasons + why.get(n, [])))
    return search.run(ranked, strong, sources, share, frozenset(forced)), why


def worst_error(t: Trial) -> float:
    """A trial's error where it is worst: the plan's backend, or where the precision is really computed."""
    return max(t.error, t.verifier_error if t.verifier_error is not None else t.error)


def low_fraction(units: list[Unit], keep) -> float:
    total = sum(u.flops for u in units)
    return 1.0 - sum(u.flops for u in units if u.node in keep) / total if total else 0.0


def finish(plan: Plan, search: Search, found: frozenset[str] | None, why: dict[str, list[str]], t0: float) -> Plan:
    """The plan as reported: the kept ops with their reasons, and the search's own account."""
    by_name = {u.node: u for u in search.units}
    pure = search.trial(())
    plan.pure_error, plan.pure_status, plan.pure_reason = pure.error, pure.status, pure.reason
    everything = frozenset(search.names)
    if everything in search.trials and search.trials[everything].status == Status.OK:  # a failed run has no error
        plan.fp32_error = search.trials[everything].error
    if found is None:
        plan.passed = False
        best = min(search.trials.values(), key=worst_error)
        plan.error = best.error
        fp32 = f"{plan.fp32_error:.3g}" if plan.fp32_error is not None else "no run"
        plan.message = (f"no plan meets tolerance {plan.tolerance:g}: even every op in fp32 gives {fp32}; best "
                        f"reachable {worst_error(best):.3g}")
        if all(t.status != Status.OK for t in search.trials.values()):
            plan.message = (f"no plan: {plan.backend} ran none of the {len(search.trials)} trials "
                            f"({pure.status}: {pure.reason})")
    else:
        final = search.trial(found)
        plan.passed, plan.error = final.passed, final.error
        if not final.passed and final.reason:  # a loaded plan the verifier fails: say where and by how much
            plan.message = final.reason
        if found and len(found) == len(search.names):
            refused = f" ({pure.status}: {pure.reason})" if pure.status != Status.OK else ""
            plan.message = (f"every op stays fp32: nothing of this model runs within the tolerance at "
                            f"{plan.precision} on {plan.backend}{refused}")
        for n in sorted(found, key=search.names.index):
            u = by_name[n]
            plan.keep.append(KeptOp(n, u.op, u.module, u.source, why.get(n) or ["needed: the plan fails without it"]))
    plan.low_fraction = low_fraction(search.units, plan.kept)
    plan.evaluations = len(search.trials)
    plan.trials = list(search.trials.values())
    plan.seconds = time.perf_counter() - t0
    return plan


def rel_l2(expected: list, outputs: list) -> float:
    import numpy as np

    from fpdiff.core import compare
    m = compare.measure([np.asarray(e) for e in expected], [np.asarray(o) for o in outputs], prec.FP32.compute)
    return m.rel_l2 if (m.nan + m.inf) == 0 else math.inf
