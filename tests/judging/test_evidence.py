"""A stored check judged again from its evidence alone: the same verdicts by the same rules, a changed rule's effect
without running a backend, and a rule that asks for evidence the run never gathered skipped in one line."""
import json

import pytest
from onnx import TensorProto, helper

import fpdiff
import onnx_models as om
from conftest import SPECS
from fpdiff.analysis.check.stored import rejudge
from fpdiff.core import precision as prec
from fpdiff.judging.rejudge import CHECK_RULES
from fpdiff.judging.rules import Rule


def test_every_kind_of_kept_value_comes_back_from_json_as_it_was():
    """Metrics with non-finite numbers, findings, spreads, pairs and lists: what the rules read after a round trip
    through the report's file is what they read in the run."""
    from fpdiff.core.compare import Finding, Metrics
    from fpdiff.judging.conditioning import Spread
    from fpdiff.judging.evidence import _decode, _encode
    m = Metrics(1.0, float("inf"), float("nan"), 0.5, -3.0, 2.0, 1.0, float("-inf"), 3, 0, 10, discrete=2, flips=1)
    values = [m, Finding("overflow", "too big", op="Exp", remedy="fp32"), None, "outputs [2] vs [3]",
              ("2 of 10 differ", 3), [Finding("underflow", "tiny")], [0, 2], True,
              Spread("fp16", 4.9e-4, 3, 1e-3, 2e-3, "inputs and weights", 1e-2, 0.5, None)]
    back = [_decode(json.loads(json.dumps(_encode(v)))) for v in values]
    assert back[0].max_rel == float("inf") and back[0].max_norm == float("-inf") and back[0].rel_l2 != back[0].rel_l2
    assert back[0].__dict__.keys() == m.__dict__.keys() and back[0].flips == 1
    assert back[1:4] == values[1:4] and back[4] == ["2 of 10 differ", 3] and back[5:8] == values[5:8]
    assert back[8] == values[8]


def _verdicts(cells) -> list[tuple]:
    """What a user reads of each cell, through the JSON report as a file holds it."""
    return [(c["backend"], c["precision"], c["status"], c["reason"], c["findings"], c["revisions"], c["metrics"])
            for c in json.loads(json.dumps([c.as_dict() for c in cells], default=str))]


def _stored(result) -> dict:
    return json.loads(json.dumps(result.as_dict(), default=str))


@pytest.mark.slow  # real backends: make test, not make test-fast
def test_a_run_whose_exporter_is_blamed_is_judged_again_the_same_and_without_the_rule_otherwise():
    r = fpdiff.check(str(SPECS / "avgpool_divisor.py"), backends=["torch", "ort"], precisions=["fp32"])
    again = rejudge(_stored(r))
    assert _verdicts(again.cells) == _verdicts(r.cells) and again.rejudged == {"changed": [], "skipped": []}
    ort = next(c for c in r.cells if c.backend == "ort")
    assert ort.status == "error" and ort.revisions[-1].rule == "exporter"
    without = rejudge(_stored(r), [rule for rule in CHECK_RULES if rule.name != "exporter"])
    assert without.rejudged["changed"] == [{"cell": "ort/cpu/fp32/static", "from": "error", "to": "mismatch"}]


@pytest.mark.slow
def test_a_failed_judge_stood_in_for_by_a_majority_is_judged_again_the_same(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="act"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool1", kernel_shape=[3], pads=[1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8])])
    path = om.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), tmp_path / "pool.onnx")
    r = fpdiff.check(path, backends=["ort", "openvino"], precisions=["fp32", "fp16"], repro_dir=None)
    assert r.judge["status"] == "failed" and r.judge["majority"]
    again = rejudge(_stored(r))
    assert _verdicts(again.cells) == _verdicts(r.cells) and not again.rejudged["changed"]


@pytest.mark.slow
def test_a_rule_asking_for_evidence_the_run_never_gathered_is_skipped_and_said(tmp_path):
    r = fpdiff.check("example:tinycnn", backends=["torch"], precisions=["fp32"])

    def wants_a_new_job(ev, cells):
        ev.run(ev.grid.key("ort", "cpu", prec.FP16, cells and ev.grid.cells[0].variant))
        cells[0].revise("new-rule", "mismatch", "should not stick")

    again = rejudge(_stored(r), (*CHECK_RULES, Rule("new-rule", wants_a_new_job)))
    assert [c.status for c in again.cells] == ["pass"]
    assert again.rejudged["skipped"] == ["new-rule: the stored run lacks the job ort cpu fp16 static"]
