"""Evidence, then rules: once a check's jobs have run, each cell gets its first verdict from its own numbers, and then
an ordered list of rules revises verdicts where the evidence says more (shape variants, a narrower format the backend
ran, the judge in doubt, the exporter, the model's conditioning). A rule changes a cell only through Cell.revise, so
every verdict carries which rules made it. Rules read numbers, never tensors: every measurement a rule needs (a cell
against the reference, against a witness, a range finding, the model's spread) is asked of Evidence, which measures
it once and keeps it, and a job the grid did not run is asked for the same way and run in the analysis's one pool.
What was kept is saved with the report, so a stored run is judged again by the rules of the day without running a
backend (`fpdiff rejudge`); a rule asking a stored run for evidence it never gathered is skipped and says so. An
analysis adds its own rules to the list (the op sweep's flip rule) instead of re-typing the chain."""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fpdiff.core import compare
from fpdiff.core.compare import Metrics
from fpdiff.core.precision import Precision
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import CellKey, Grid
from fpdiff.runtime import external
from fpdiff.runtime.worker import JobResult

# the readings a cell is measured against: the float64 reference (or what stands in for it), the independent fp32
# run a suspect judge is held against, and the majority's fp32 reading when the judge is overruled or failed
FLOAT64, STAND_IN, MAJORITY = "float64", "stand-in", "majority"


class Missing(Exception):
    """A stored run lacks evidence a rule asks for (the rule changed since it ran): that rule is not re-applied."""


@dataclass
class Evidence:
    """What the rules judge from: the grid, every job's result by key, the float64 reference (or what stands in for
    it), the judge's cross-check, and every measurement made so far (`kept`, by name). A stored run has the jobs'
    facts without their tensors and the kept measurements; `stored` says so, and nothing is measured or run anew."""
    grid: Grid
    results: dict[CellKey, JobResult]
    ref: JobResult
    verdict: object  # judge.JudgeCheck
    env: dict
    timeout: float
    kept: dict[str, object] = field(default_factory=dict)
    stored: bool = False
    skipped: list[str] = field(default_factory=list)  # rules a stored run could not re-apply, with why

    def keep(self, name: str, measure: Callable[[], object]) -> object:
        """A measurement by name: made once and kept (a stored run's kept one; missing there is Missing)."""
        if name not in self.kept:
            if self.stored:
                raise Missing(f"the measurement {name!r}")
            self.kept[name] = measure()
        return self.kept[name]

    def run(self, key: CellKey) -> JobResult:
        """A job a rule asks for: the grid's result, or run now in the analysis's pool (the shared one when open)."""
        if key not in self.results:
            if self.stored:
                raise Missing(f"the job {key}")
            with external.pool(self.env) as pool:
                self.results[key] = pool.run(self.grid.job(key), self.timeout)
        return self.results[key]

    def baseline(self, p: Precision) -> Metrics | None:
        """The baseline of a precision (the judge's code at it) against the reference; None where it did not run,
        has no reference, or its outputs are shaped otherwise. A format the grid did not run is asked for."""
        key = self.grid.baseline(p)
        if not self.stored:
            self.run(key)
        return self.metrics(key)

    @property
    def has_reference(self) -> bool:
        """Whether there is a float64 reading to judge against (the judge's, or a majority standing in for it)."""
        return bool(self.kept.get("has reference")) if self.stored else self.ref.outputs is not None

    def reading(self, against: str) -> list:
        """The outputs a reading stands for (live runs only)."""
        if against == FLOAT64:
            return self.ref.outputs
        if against == STAND_IN:
            return self.results[self.verdict.stand_in].outputs
        return self.verdict.reading

    def metrics(self, key: CellKey, against: str = FLOAT64) -> Metrics | None:
        """A job's outputs measured against a reading in its precision's compute dtype; None where the job did not
        run through or its outputs cannot be measured (`unmeasurable` says why)."""
        m = self._measured(key, against)
        return m if isinstance(m, Metrics) else None

    def unmeasurable(self, key: CellKey, against: str = FLOAT64) -> str | None:
        """Why a job that ran cannot be measured against the reading (its outputs are shaped otherwise); None when it
        can, or did not run."""
        m = self._measured(key, against)
        return m if isinstance(m, str) else None

    def _measured(self, key: CellKey, against: str) -> Metrics | str | None:
        """The measurement as it is kept (and stored): Metrics, the reason it cannot be made, or None."""
        def measure() -> Metrics | str | None:
            r = self.results.get(key)
            ref = self.reading(against)
            if r is None or r.status != Status.OK or ref is None:
                return None
            if len(r.outputs) != len(ref) or any(a.shape != b.shape for a, b in zip(r.outputs, ref)):
                return (f"outputs {[list(a.shape) for a in r.outputs]} vs float64 "
                        f"{[list(a.shape) for a in ref]}")
            return compare.measure(ref, r.outputs, key.precision.compute)
        return self.keep(f"metrics {against} {key}", measure)


@dataclass(frozen=True)
class Rule:
    """One rule: its name (what a revision says changed the verdict) and how it reads the evidence."""
    name: str
    apply: Callable[[Evidence, list[Cell]], None]


def judge(evidence: Evidence, first: Callable[[Evidence], list[Cell]], rules: Sequence[Rule]) -> list[Cell]:
    """The cells' first verdicts, then every rule in order; on a stored run a rule whose evidence is missing is
    skipped (it ran on a copy of the cells, so a half-applied rule leaves nothing behind) and said in `skipped`."""
    cells = first(evidence)
    for rule in rules:
        if not evidence.stored:
            rule.apply(evidence, cells)
            continue
        trial = copy.deepcopy(cells)
        try:
            rule.apply(evidence, trial)
        except Missing as e:
            evidence.skipped.append(f"{rule.name}: the stored run lacks {e}")
            continue
        cells[:] = trial
    return cells


def insert_after(rules: Sequence[Rule], name: str, *added: Rule) -> tuple[Rule, ...]:
    """The rule list with `added` placed right after the rule called `name` (an analysis's own rules)."""
    names = [r.name for r in rules]
    if name not in names:
        raise ValueError(f"no rule named {name}: {', '.join(names)}")
    i = names.index(name) + 1
    return (*rules[:i], *added, *rules[i:])
