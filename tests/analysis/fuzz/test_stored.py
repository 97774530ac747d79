"""A stored campaign judged again from the evidence each graph's record keeps: the same statuses and outcomes by the
same rules, a changed rule list's effect on every graph without running a backend."""
import json

import pytest

import fpdiff
from fpdiff.analysis.fuzz.stored import rejudge
from fpdiff.analysis.ops import verdict
from fpdiff.judging.rules import Rule


def _all_mismatch(ev, cells) -> None:
    for c in cells:
        c.revise("planted-rule", "mismatch", "every cell called mismatch by a planted rule")


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    r = fpdiff.fuzz(seed=3, graphs=4, backends=["ort"], precisions=["fp32", "fp16"], repro_dir=None,
                    progress=False, cache_dir=str(tmp_path_factory.mktemp("cache")))
    return json.loads(json.dumps(r.as_dict(), default=str))


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_a_stored_campaign_judged_again_by_the_same_rules_is_the_same(campaign):
    judged = [r for r in campaign["records"] if r["statuses"]]
    assert judged and all(r["evidence"] for r in judged)
    again = json.loads(json.dumps(rejudge(campaign).as_dict(), default=str))
    assert again["rejudged"] == {"changed": [], "skipped": []}
    assert [(r["statuses"], r["outcome"], r["discard"]) for r in again["records"]] == \
        [(r["statuses"], r["outcome"], r["discard"]) for r in campaign["records"]]


@pytest.mark.slow
def test_a_changed_rule_list_moves_every_graphs_cells(campaign):
    planted = {name: (*rules, Rule("planted-rule", _all_mismatch)) for name, rules in verdict.RULES.items()}
    again = rejudge(campaign, planted)
    cells = sum(len(r["statuses"]) for r in campaign["records"] if r["evidence"])
    assert len(again.rejudged["changed"]) == sum(s != "mismatch" for r in campaign["records"] if r["evidence"]
                                                 for s in r["statuses"].values()) and cells > 0
    assert all(r.outcome == "failing" for r in again.records if r.evidence)


def test_a_campaign_without_evidence_is_one_line():
    with pytest.raises(fpdiff.UsageError, match="holds no evidence"):
        rejudge({"kind": "fuzz", "records": [{"index": 0, "seed": 1, "id": "g", "form": "torch", "ops": [],
                                             "description": "", "outcome": "pass"}]})
