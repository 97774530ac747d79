"""A stored check judged again from the evidence its JSON report carries (judging/evidence.py), by today's rules and
without running a backend."""
from __future__ import annotations

from collections.abc import Sequence

from fpdiff.analysis.check.result import CheckResult
from fpdiff.core.errors import UsageError
from fpdiff.judging.evidence import load
from fpdiff.judging.rejudge import CHECK_RULES, judge_run
from fpdiff.judging.rules import Rule


def rejudge(report: dict, rules: Sequence[Rule] = CHECK_RULES) -> CheckResult:
    """A stored check judged again by `rules` from its evidence alone; the result says which cells changed."""
    if report.get("kind") != "check":
        kind = report.get("kind")
        raise UsageError("rejudge takes a check's JSON report; this one is " + (
            f"the report of fpdiff {kind}" if isinstance(kind, str) and kind else "not a report of fpdiff's"))
    if "evidence" not in report:
        raise UsageError("this check's report holds no evidence (written by an fpdiff before it kept any): rerun the "
                         "check with --json to judge it again later")
    ev = load(report["evidence"])
    cells = judge_run(ev, rules)
    was = {"/".join((c["backend"], c["device"], c["precision"], c["shape_variant"])): c["status"]
           for c in report["cells"]}
    changed = [{"cell": c.label, "from": was.get(c.label), "to": str(c.status)} for c in cells
               if was.get(c.label) != c.status]
    return CheckResult(report["model"], cells, report["reference"], report["versions"], report.get("duration_s", 0.0),
                       judge=report.get("judge", {}), source=report.get("source", {}),
                       fingerprint=report.get("model_hash", ""), next=list(report.get("next", [])),
                       evidence=report["evidence"], rejudged={"changed": changed, "skipped": ev.skipped})
