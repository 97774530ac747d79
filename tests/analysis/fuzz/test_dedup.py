"""One root cause, one finding: hits on a known finding are confirmed by running the cut graph, and findings whose
failure is another's culprit op alone are merged. The probe here is a real judgement on the graph's values (a
sigmoid reached by arguments below -12 fails, ORT's Sigmoid tail), so the logic is tested without a backend."""
from __future__ import annotations

import numpy as np

from fpdiff.analysis.fuzz import dedup, emit
from fpdiff.analysis.fuzz.campaign import Found
from fpdiff.analysis.fuzz.graph import Graph, Input, Node, Sample, TensorType


def _sample(ops: list[str], x: np.ndarray) -> Sample:
    """A chain of one-argument ops on x."""
    nodes = tuple(Node(op, (i,)) for i, op in enumerate(ops))
    return Sample(Graph((Input(TensorType(x.shape)),), nodes, len(ops)), (x,))


def sigmoid_tail(s: Sample) -> bool:
    """Fails when a live sigmoid gets an argument below -12 (the values are the graph's float64 ones)."""
    values = emit.values64(s)
    live = s.graph.live()
    return any(n.op == "sigmoid" and s.graph.value_of_node(i) in live and values[n.args[0]].min() < -12
               for i, n in enumerate(s.graph.nodes))


def _found(sig: str, sample: Sample) -> Found:
    return Found(sig, "ort", "fp32", "mismatch", "mismatch", sample.graph.ops(), "plain", "", None, "torch",
                 {}, {}, hits=[sig + "-graph"], sample=sample.to_bytes())


LOW = np.array([-14.0, -13.0, 1.0])  # reaches the tail
HIGH = np.array([-1.0, 0.5, 2.0])  # does not


def test_nodes_in_order_finds_live_ops_in_sequence():
    g = _sample(["neg", "sigmoid", "exp", "log"], LOW).graph
    assert dedup.nodes_in_order(g, ["sigmoid", "log"]) == [1, 3]
    assert dedup.nodes_in_order(g, ["log", "sigmoid"]) is None
    assert dedup.nodes_in_order(g, ["tanh"]) is None


def test_a_hit_counts_only_when_the_cut_graph_fails():
    # sigmoid then log on the tail: the known ops cut out still fail
    assert dedup.holds(_sample(["sigmoid", "log"], LOW), ["sigmoid"], sigmoid_tail)
    # neg first moves the sigmoid's arguments off the tail: the graph holds the ops, but not the failure
    assert not dedup.holds(_sample(["neg", "sigmoid", "log"], LOW), ["sigmoid"], sigmoid_tail)


def test_the_culprit_is_the_op_that_fails_alone():
    assert dedup.culprit(_sample(["sigmoid", "log"], LOW), sigmoid_tail) == "sigmoid"
    assert dedup.culprit(_sample(["exp"], LOW), sigmoid_tail) == "exp"  # one op: itself
    assert dedup.culprit(_sample(["tanh", "log"], HIGH + 3), sigmoid_tail) is None


def test_signatures_of_one_cause_merge_and_others_stay():
    one = _found("sigmoid", _sample(["sigmoid"], LOW))
    two = _found("sigmoid>log", _sample(["sigmoid", "log"], LOW))
    three = _found("sigmoid>reciprocal", _sample(["sigmoid", "reciprocal"], LOW))
    other = _found("exp>log", _sample(["exp", "log"], HIGH))  # fails for another reason: not the sigmoid
    elsewhere = _found("sigmoid-openvino", _sample(["sigmoid", "log"], LOW))
    elsewhere.backend = "openvino"  # another backend is another bug even with the same op
    out = dedup.root_causes([one, two, three, other, elsewhere], lambda f: sigmoid_tail)
    assert [f.signature for f in out] == ["sigmoid", "exp>log", "sigmoid-openvino"]
    assert sorted(out[0].merged) == ["sigmoid>log", "sigmoid>reciprocal"]
    assert sorted(out[0].hits) == ["sigmoid-graph", "sigmoid>log-graph", "sigmoid>reciprocal-graph"]
    assert not out[1].merged and not out[2].merged


def test_findings_read_back_without_their_graph_are_left_as_they_are():
    a = _found("sigmoid", _sample(["sigmoid"], LOW))
    b = _found("sigmoid>log", _sample(["sigmoid", "log"], LOW))
    b.sample = b""
    assert [f.signature for f in dedup.root_causes([a, b], lambda f: sigmoid_tail)] == ["sigmoid", "sigmoid>log"]


def test_a_declaration_the_program_contradicts_is_discarded_not_reported():
    """A mix whose declared dynamic dim the program fixes (dynamo: "specialized it to be a constant") is the
    fuzzer's declaration at fault: the graph is discarded with that reason, while a real error in the same graph
    still makes it failing."""
    from fpdiff.analysis.fuzz import oracle
    from fpdiff.analysis.ops.case import OpsCell
    from fpdiff.analysis.ops.sweep import CaseOutcome

    def cell(variant: str, status: str, reason: str = "") -> OpsCell:
        return OpsCell("inductor", "cpu", "fp32", variant, status, reason, op="fuzz:where", catalog="fuzz",
                       variant="dynamic", case="g1", family="where")
    said = ("inductor at prepare failed: ConstraintViolationError: Constraints violated (L['arg1'].size()[0])! "
            "You marked L['arg1'].size()[0] as dynamic but your code specialized it to be a constant (2).")
    ok = [cell("static", "pass"), cell("dynamic", "pass")]
    v = oracle.verdict_of("g1", CaseOutcome("g1", ok + [cell("mixed:input_d0-static", "error", said)]))
    assert v.outcome == oracle.DISCARDED and v.discard == oracle.DECLARED_DIMS
    real = cell("mixed:arg1_d0-static", "error", "iree-compile failed: unbounded stack allocations")
    v = oracle.verdict_of("g1", CaseOutcome("g1", ok + [cell("mixed:input_d0-static", "error", said), real]))
    assert v.outcome == oracle.FAILING and [f.shape_variant for f in v.failures] == ["mixed:arg1_d0-static"]
    # in the static cell the same words are no declaration of the fuzzer's: reported
    v = oracle.verdict_of("g1", CaseOutcome("g1", [cell("static", "error", said)]))
    assert v.outcome == oracle.FAILING
