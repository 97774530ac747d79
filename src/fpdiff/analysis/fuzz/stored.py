"""A stored campaign judged again from the evidence each graph's record carries (judging/evidence.py), by today's
rules and without running a backend: each graph's cells, and its outcome where the cells decide it (a graph
discarded because its float64 reference failed or two float64 implementations disagree stays discarded). Findings
are kept as stored: a finding's minimization ran probes that are not evidence of the graph."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from fpdiff.analysis.fuzz import oracle
from fpdiff.analysis.fuzz.campaign import Found, GraphRecord
from fpdiff.analysis.fuzz.result import UNRUN, FuzzResult
from fpdiff.analysis.ops.stored import judged_again
from fpdiff.analysis.ops.sweep import CaseOutcome
from fpdiff.analysis.ops.verdict import RULES
from fpdiff.core.errors import UsageError
from fpdiff.judging.rules import Rule

# discards the cells do not decide: judged again, the graph keeps them
STANDING = (oracle.NO_REFERENCE, oracle.JUDGE_DISAGREES)


def rejudge(report: dict, rules: Mapping[str, Sequence[Rule]] = RULES) -> FuzzResult:
    """A stored campaign judged again by `rules` (the sweep's, by the name each record's evidence names) from its
    records' evidence; the result says which graphs' cells changed."""
    try:
        records = [GraphRecord(**r) for r in report.get("records") or [] if r.get("outcome") != UNRUN]
        keep = {f.name for f in dataclasses.fields(Found)} - {"sample"}
        found = [Found(**{k: v for k, v in f.items() if k in keep}) for f in report.get("findings") or []]
    except TypeError as e:
        raise UsageError(f"this campaign's records do not read as this fpdiff's ({e})") from None
    if not any(r.evidence for r in records):
        raise UsageError("this campaign's report holds no evidence (written by an fpdiff before it kept any): rerun "
                         "the campaign with --json to judge it again later")
    changed: list[dict] = []
    skipped: list[str] = []
    for r in records:
        if r.evidence:
            skipped += _again(r, changed, rules)
    fields = {f.name for f in dataclasses.fields(FuzzResult)} - {"records", "findings", "rejudged"}
    return FuzzResult(records=records, findings=found, **{k: report[k] for k in fields if k in report},
                      rejudged={"changed": changed, "skipped": list(dict.fromkeys(skipped))})


def _again(r: GraphRecord, changed: list[dict], rules: Mapping[str, Sequence[Rule]]) -> list[str]:
    """One graph's cells judged again, its statuses (and outcome, where they decide it) the new ones; -> the rules
    it could not re-apply."""
    ev, cells = judged_again(r.evidence, rules, "campaign")
    v = oracle.verdict_of(r.id or "", CaseOutcome(r.id or "", cells=cells))
    changed += [{"cell": f"{r.id}/{k}", "from": r.statuses.get(k), "to": s} for k, s in v.statuses.items()
                if r.statuses.get(k) != s]
    r.statuses = v.statuses
    if not any(str(r.discard or "").startswith(s) for s in STANDING):
        r.outcome, r.discard = v.outcome, v.discard
    return list(ev.skipped)
