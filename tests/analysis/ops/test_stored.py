"""A stored sweep judged again from the evidence its report keeps: every cell the same by the same rules (cells
judged in a program and cells judged alone), a changed rule list's effect on every cell without running a backend,
and reports that cannot be judged again refused in one line."""
import json

import pytest
from rich.console import Console

import fpdiff
from fpdiff import analyses
from fpdiff.analysis.ops import verdict
from fpdiff.analysis.ops.stored import rejudge
from fpdiff.judging.rules import Rule

# the fields of a cell a judgement decides, as the JSON report holds them
JUDGED = ("status", "reason", "findings", "revisions", "metrics", "baseline_metrics", "support")


def _stored(result) -> dict:
    return json.loads(json.dumps(result.as_dict(), default=str))


def _judged(cells: list[dict]) -> list[tuple]:
    return [(c["case"], c["backend"], c["precision"], c["shape_variant"], *(json.dumps(c.get(f)) for f in JUDGED))
            for c in cells]


def _all_mismatch(ev, cells) -> None:
    for c in cells:
        c.revise("planted-rule", "mismatch", "every cell called mismatch by a planted rule")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A small sweep of ONNX and torch cases on two backends and two precisions: cases judged in programs and the
    integer-valued ones (judged by the flip rule) alone."""
    r = fpdiff.ops(patterns=["Erf", "Softmax", "nn.functional.gelu", "round", "ArgMax"], variants=["sample"],
                   backends=["torch", "ort"], precisions=["fp32", "fp16"], repro_dir=None, progress=False,
                   cache_dir=str(tmp_path_factory.mktemp("cache")))
    return _stored(r)


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_a_stored_sweep_judged_again_by_the_same_rules_is_the_same(sweep):
    assert sweep["evidence"] and all(isinstance(c.get("evidence"), int) for c in sweep["cells"])
    rules = {json.dumps(e["rules"]) for e in sweep["evidence"]}
    assert rules == {'"check"', '"ops"'}, rules  # both rule lists were stored (the flip rule's cases too)
    again = rejudge(sweep)
    assert again.rejudged == {"changed": [], "skipped": []}
    assert _judged(_stored(again)["cells"]) == _judged(sweep["cells"])


@pytest.mark.slow
def test_a_changed_rule_list_moves_every_cell_it_judges_without_running_a_backend(sweep):
    planted = {name: (*rules, Rule("planted-rule", _all_mismatch)) for name, rules in verdict.RULES.items()}
    again = rejudge(sweep, planted)
    moved = {c["cell"] for c in again.rejudged["changed"]}
    assert len(moved) == sum(c["status"] != "mismatch" for c in sweep["cells"]) > 0
    assert all(c.status == "mismatch" and c.revisions[-1].rule == "planted-rule" for c in again.cells)
    assert again.exit_code() == 1
    console = Console(record=True, width=200)
    analyses.show(again, console)  # the terminal says what the rules changed
    shown = console.export_text()
    assert f"judged again from the stored evidence: {len(moved)} verdicts changed" in shown, shown[-2000:]


def test_a_sweep_without_evidence_or_of_unknown_rules_is_one_line():
    with pytest.raises(fpdiff.UsageError, match="holds no evidence"):
        rejudge({"kind": "ops", "cells": [{"case": "c"}]})
    with pytest.raises(fpdiff.UsageError, match="names rules 'other'; this fpdiff judges by check, ops"):
        rejudge({"kind": "ops", "cells": [], "evidence": [{"rules": "other"}]})
