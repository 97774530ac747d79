"""A campaign survives a bug of fpdiff's own on one graph: that graph is a discard that says so, the next graphs
run, and the campaign answers."""
from __future__ import annotations

from fpdiff import api
from fpdiff.analysis.fuzz import campaign, oracle


def test_an_error_of_fpdiffs_own_on_one_graph_costs_that_graph(monkeypatch):
    real = oracle.judge
    calls = []

    def judge_breaking_once(sample, config, reg, work):
        calls.append(sample.id)
        if len(calls) == 1:  # fpdiff's own code failing on the first graph (as a Dim of one size once did)
            raise AssertionError("Cannot create Dim with inconsistent min=5, max=5")
        return real(sample, config, reg, work)
    monkeypatch.setattr(oracle, "judge", judge_breaking_once)
    r = api.fuzz(backends=["torch"], precisions=["fp32"], graphs=3, seed=5, ops=["add", "mul", "tanh"], repro_dir=None)
    d = r.as_dict()
    assert len(calls) == 3 and d["graphs"] == 2
    assert d["discarded"]["by_reason"] == {campaign.INTERNAL: 1}
    said = [g["reason"] for g in d["discarded"]["graphs"]]
    assert said == [f"{campaign.INTERNAL}: AssertionError: Cannot create Dim with inconsistent min=5, max=5"]
