"""Evidence, then rules: once a check's jobs have run, each cell gets its first verdict from its own numbers, and then
an ordered list of rules revises verdicts where the evidence says more (shape variants, a narrower format the backend
ran, the judge in doubt, the exporter, the model's conditioning). A rule changes a cell only through Cell.revise, so
every verdict carries which rules made it; a rule that needs a job the grid did not run asks Evidence for it, which
runs it in the analysis's one pool. An analysis adds its own rules to the list (the op sweep's flip rule) instead of
re-typing the chain."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fpdiff.analysis.check.grid import Grid, JobKey
from fpdiff.analysis.check.result import Cell
from fpdiff.core.compare import Metrics
from fpdiff.runtime import external
from fpdiff.runtime.worker import JobResult


@dataclass
class Evidence:
    """What the rules judge from: the grid, every job's result by key, the float64 reference (or what stands in for
    it) and the judge's cross-check; the baselines' metrics as measured once."""
    grid: Grid
    results: dict[JobKey, JobResult]
    ref: JobResult
    verdict: object  # judge.JudgeCheck
    env: dict
    timeout: float
    base: dict[str, Metrics | None] = field(default_factory=dict)

    def run(self, key: JobKey) -> JobResult:
        """A job a rule asks for: the grid's result, or run now in the analysis's pool (the shared one when open)."""
        if key not in self.results:
            with external.pool(self.env) as pool:
                self.results[key] = pool.run(self.grid.job(key), self.timeout)
        return self.results[key]

    def result(self, cell_key) -> JobResult:
        """The job result behind one of the grid's cells (its key with the Precision object)."""
        return self.results[(cell_key[0], cell_key[1], cell_key[2].name, cell_key[3])]


@dataclass(frozen=True)
class Rule:
    """One rule: its name (what a revision says changed the verdict) and how it reads the evidence."""
    name: str
    apply: Callable[[Evidence, list[Cell]], None]


def judge(evidence: Evidence, first: Callable[[Evidence], list[Cell]], rules: Sequence[Rule]) -> list[Cell]:
    """The cells' first verdicts, then every rule in order."""
    cells = first(evidence)
    for rule in rules:
        rule.apply(evidence, cells)
    return cells


def insert_after(rules: Sequence[Rule], name: str, *added: Rule) -> tuple[Rule, ...]:
    """The rule list with `added` placed right after the rule called `name` (an analysis's own rules)."""
    names = [r.name for r in rules]
    if name not in names:
        raise ValueError(f"no rule named {name}: {', '.join(names)}")
    i = names.index(name) + 1
    return (*rules[:i], *added, *rules[i:])
