"""A stored sweep judged again from the evidence its JSON report carries (judging/evidence.py, one per judgement:
a case run alone, or a case's outputs in a program), by today's rules and without running a backend. A cell takes
its judgement's new verdict, and its support state is read again where that verdict moved."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from fpdiff.analysis.ops import verdict
from fpdiff.analysis.ops.case import OpsCell
from fpdiff.analysis.ops.result import OpsResult, cell_from_dict
from fpdiff.analysis.ops.support import support_state
from fpdiff.core.errors import UsageError
from fpdiff.judging.cell import Cell
from fpdiff.judging.evidence import load
from fpdiff.judging.rejudge import judge_run
from fpdiff.judging.rules import Evidence, Rule
from fpdiff.runtime.worker import JobResult

# what a judgement decides of a cell; the rest (its case, support record, repro, info) is the sweep's own
JUDGED = ("status", "reason", "metrics", "baseline_metrics", "computed_dtype", "output_dtypes", "findings",
          "effective_bits", "stage", "component", "op_dtypes", "planned_op_dtypes", "revisions")


def rejudge(report: dict, rules: Mapping[str, Sequence[Rule]] = verdict.RULES) -> OpsResult:
    """A stored sweep judged again by `rules` (the rule lists by the name its evidence records) from its evidence
    alone; the result says which cells changed."""
    evidence = report.get("evidence")
    if not evidence:
        raise UsageError("this sweep's report holds no evidence (written by an fpdiff before it kept any): rerun the "
                         "sweep with --json to judge it again later")
    cells = [cell_from_dict(d, evidence) for d in report.get("cells") or []]
    by_judgement: dict[int, list[OpsCell]] = {}
    for d, c in zip(report.get("cells") or [], cells):
        if isinstance(d.get("evidence"), int):
            by_judgement.setdefault(d["evidence"], []).append(c)
    again: dict[int, OpsCell] = {}
    skipped: list[str] = []
    for i, saved in enumerate(evidence):
        skipped += _again(saved, by_judgement.get(i, []), again, rules)
    changed = [{"cell": c.label, "from": str(c.status), "to": str(again[id(c)].status)} for c in cells
               if id(c) in again and again[id(c)].status != c.status]
    fields = {f.name for f in dataclasses.fields(OpsResult)} - {"cells", "rejudged"}
    return OpsResult(cells=[again.get(id(c), c) for c in cells], **{k: report[k] for k in fields if k in report},
                     rejudged={"changed": changed, "skipped": list(dict.fromkeys(skipped))})


def _again(saved: dict, cells: list[OpsCell], again: dict[int, OpsCell],
           rules: Mapping[str, Sequence[Rule]]) -> list[str]:
    """One judgement's cells judged again (those of its grid the sweep kept), each new cell in `again` by the stored
    one's id; -> the rules it could not re-apply."""
    ev, judged = judged_again(saved, rules, "sweep")
    mine = {(c.backend, c.precision, c.shape_variant): c for c in cells}
    for new, key in zip(judged, ev.grid.cells):
        old = mine.get((new.backend, new.precision, new.shape_variant))
        if old is not None:
            again[id(old)] = _taken(old, new, ev.results.get(key))
    return list(ev.skipped)


def _taken(old: OpsCell, new: Cell, r: JobResult | None) -> OpsCell:
    """The stored cell with the new judgement; its support state read again when the verdict moved."""
    cell = dataclasses.replace(old, **{name: getattr(new, name) for name in JUDGED})
    if cell.status != old.status and r is not None:
        cell.support, cell.support_detail = support_state(cell.status, cell.findings, r.support, cell.precision,
                                                          cell.reason)
    return cell


def judged_again(saved: dict, rules: Mapping[str, Sequence[Rule]], what: str) -> tuple[Evidence, list[Cell]]:
    """One stored judgement's evidence and its cells judged again by the rule list its evidence names; a name this
    fpdiff does not know is one line (`what`: the run's kind, as the line says it)."""
    if saved.get("rules") not in rules:
        raise UsageError(f"this {what}'s evidence names rules {saved.get('rules')!r}; this fpdiff judges by "
                         f"{', '.join(rules)}: rerun the {what} to judge it again")
    ev = load(saved)
    return ev, judge_run(ev, rules[saved["rules"]])

