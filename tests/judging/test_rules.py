"""The rule engine: a verdict changes only through Cell.revise, which keeps its provenance; rules run in order; an
analysis adds its own rule to check's list without re-typing it."""
from types import SimpleNamespace

import pytest

from fpdiff.analysis.ops.verdict import INTEGER_FLIPS, OPS_RULES
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell, Revision
from fpdiff.judging.rejudge import CHECK_RULES
from fpdiff.judging.rules import Rule, insert_after, judge


def _cell(status=Status.OK) -> Cell:
    return Cell("ort", "cpu", "fp16", "static", status)


def test_revise_records_each_change_of_status_with_its_rule():
    c = _cell()
    c.revise("float64", Status.MISMATCH, "rel L2 0.5 is 50x the tolerance")
    c.revise("conditioning", Status.ILL_CONDITIONED, "long reason (was mismatch: ...)", why="the model moves 0.4")
    assert c.status is Status.ILL_CONDITIONED and c.reason == "long reason (was mismatch: ...)"
    assert c.revisions == [Revision("float64", "ok", "mismatch", "rel L2 0.5 is 50x the tolerance"),
                           Revision("conditioning", "mismatch", "ill-conditioned", "the model moves 0.4")]
    assert c.as_dict()["revisions"][1] == {"rule": "conditioning", "from": "mismatch", "to": "ill-conditioned",
                                           "why": "the model moves 0.4"}


def test_a_rule_that_keeps_the_status_changes_the_reason_only():
    c = _cell(Status.PASS)
    c.revise("float64", Status.PASS, "rel L2 1e-8")
    assert c.revisions == [] and c.reason == "rel L2 1e-8"


def test_revise_refuses_a_status_outside_the_vocabulary():
    with pytest.raises(ValueError):
        _cell().revise("mine", "fine", "not a status")


def test_rules_run_in_order_after_the_first_verdicts():
    seen = []
    rules = [Rule("a", lambda ev, cells: seen.append(("a", len(cells)))),
             Rule("b", lambda ev, cells: seen.append(("b", cells[0].status)))]

    def first(ev):
        c = _cell()
        c.revise("float64", Status.PASS, "fine")
        return [c]

    cells = judge(SimpleNamespace(stored=False), first, rules)
    assert seen == [("a", 1), ("b", Status.PASS)] and cells[0].status is Status.PASS


def test_an_analysis_adds_its_rule_into_checks_list():
    extra = Rule("mine", lambda ev, cells: None)
    rules = insert_after(CHECK_RULES, "survives-precision", extra)
    names = [r.name for r in rules]
    assert names.index("mine") == names.index("survives-precision") + 1
    assert [r for r in rules if r is not extra] == list(CHECK_RULES)
    with pytest.raises(ValueError, match="no rule named nothing"):
        insert_after(CHECK_RULES, "nothing", extra)


def test_the_op_sweeps_flip_rule_sits_before_the_judges_and_conditioning():
    names = [r.name for r in OPS_RULES]
    assert names.index(INTEGER_FLIPS) < names.index("judge-failed") < names.index("conditioning")
    assert len(set(names)) == len(names)
