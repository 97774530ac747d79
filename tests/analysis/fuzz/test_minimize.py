"""The minimizer: graph surgery keeps float64 semantics (real torch values), and delta debugging, shape shrinking,
value simplification and variant removal keep exactly what a probe needs, within the probe budget."""
from __future__ import annotations

import numpy as np
import pytest

from fpdiff.analysis.fuzz.emit import value_types, values64
from fpdiff.analysis.fuzz.graph import Graph, Input, Node, Sample, TensorType, attrs_of
from fpdiff.analysis.fuzz.minimize import CUT, cut, minimize, reshape_inputs, round_significant, small_integers
from fpdiff.analysis.ops.case import CHANNELS_LAST, CONTIGUOUS


def six_ops(x_range: str = "normal", layout: str = CONTIGUOUS) -> Sample:
    """exp, add, tanh, softmax (over an odd last dim, 63), mul, sum: six ops over two [4, 63] inputs."""
    t = TensorType((4, 63))
    nodes = (Node("exp", (0,)),                                 # 2
             Node("add", (2, 1)),                               # 3
             Node("tanh", (3,)),                                # 4
             Node("softmax", (4,), attrs_of({"dim": 1})),       # 5
             Node("mul", (5, 3)),                               # 6
             Node("sum", (6,), attrs_of({"dim": 1, "keepdim": False})))  # 7
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 63))
    if x_range == "near-max":
        x = np.sign(x) * 3000.0 * (1 + np.abs(x))
    inputs = (Input(t, layout, (), x_range), Input(t, layout))
    return Sample(Graph(inputs, nodes, 7), (x, rng.standard_normal((4, 63))))


class Counting:
    """A probe that counts its calls and checks every candidate it is asked about still types."""

    def __init__(self, holds):
        self.holds, self.calls = holds, 0

    def __call__(self, s: Sample) -> bool:
        self.calls += 1
        value_types(s.graph)
        return bool(self.holds(s))


def _live(s: Sample) -> list[Node]:
    live = s.graph.live()
    return [n for i, n in enumerate(s.graph.nodes) if s.graph.value_of_node(i) in live]


def softmax_on_odd(s: Sample) -> bool:
    """The failure: softmax over a last dim that is odd and at least 3 (a vector loop's tail)."""
    types = value_types(s.graph)
    return any(n.op == "softmax" and types[n.args[0]].shape[-1] % 2 == 1 and types[n.args[0]].shape[-1] >= 3
               for n in _live(s))


def tanh_into_softmax(s: Sample) -> bool:
    """The failure needs two ops in sequence: a softmax fed by a tanh."""
    g, nodes = s.graph, s.graph.nodes
    return any(n.op == "softmax" and n.args[0] >= len(g.inputs)
               and nodes[n.args[0] - len(g.inputs)].op == "tanh" for n in _live(s))


def test_cut_keeps_float64_values_bit_for_bit():
    s = six_ops()
    before = values64(s)
    for keep in ({3}, {3, 4}, {1, 2, 3}, {0, 5}, {2, 4, 5}):
        c = cut(s, keep)
        assert c is not None
        last = s.graph.value_of_node(max(keep))
        after = values64(c)[c.graph.output]
        assert after.tobytes() == np.ascontiguousarray(before[last]).tobytes(), keep
        assert after.shape == before[last].shape


def test_cut_renumbers_and_makes_inputs_of_removed_producers():
    s = six_ops()
    full = values64(s)
    c = cut(s, {3, 4})  # softmax and mul kept: tanh's output (softmax's argument) and add's (mul's) become inputs
    assert [(n.op, n.args) for n in c.graph.nodes] == [("softmax", (1,)), ("mul", (2, 0))]
    assert c.graph.output == 3
    assert [(x.range, x.dynamic, x.type.shape) for x in c.graph.inputs] == [(CUT, (), (4, 63))] * 2
    assert np.array_equal(c.values[0], full[3]) and np.array_equal(c.values[1], full[4])
    only = cut(s, {0, 5})  # exp and sum kept: sum's argument (mul) is cut, so exp is dead and dropped with x1
    assert [n.op for n in only.graph.nodes] == ["sum"] and len(only.graph.inputs) == 1
    assert cut(s, set()) is None


def test_cut_keeps_the_graph_layout_and_original_inputs():
    s = six_ops(layout=CHANNELS_LAST)
    c = cut(s, {0, 1})  # exp(x0) + x1: both original inputs kept as they were
    assert c.graph.inputs == s.graph.inputs and all(v is w for v, w in zip(c.values, s.values))
    assert {x.layout for x in cut(s, {3}).graph.inputs} == {CHANNELS_LAST}  # a torch case takes one layout


def test_reshape_inputs_crops_leading_values_and_refuses_what_does_not_type():
    s = six_ops()
    r = reshape_inputs(s, [(2, 7), (2, 7)])
    assert r.graph.inputs[0].type.shape == (2, 7)
    assert np.array_equal(r.values[0], s.values[0][:2, :7]) and r.values[0].flags.c_contiguous
    assert reshape_inputs(s, [(2, 7), (2, 5)]) is None  # add no longer broadcasts
    assert reshape_inputs(s, [(8, 63), (8, 63)]) is None  # values are never invented
    m = Sample(Graph((Input(TensorType((3, 5))), Input(TensorType((5, 4)))), (Node("matmul", (0, 1)),), 2),
               (np.ones((3, 5)), np.ones((5, 4))))
    assert reshape_inputs(m, [(3, 2), (5, 4)]) is None and reshape_inputs(m, [(3, 2), (2, 4)]) is not None


def test_one_op_and_an_odd_dim_are_what_the_failure_needs():
    probe = Counting(softmax_on_odd)
    m = minimize(six_ops(), probe, budget=60)
    assert [n.op for n in _live(m.sample)] == ["softmax"]
    assert softmax_on_odd(m.sample)
    shape = m.sample.graph.inputs[0].type.shape
    assert shape[-1] % 2 == 1 and shape[-1] < 63 and shape[0] == 1  # shrunk, still odd; the free dim down to 1
    assert "odd-size 3" in m.matters  # 3 -> 2 lost it (1 is below the probe's tail)
    assert m.probes == probe.calls <= 60
    assert m.steps[0].startswith("ops: 6 -> 1")


def test_two_ops_in_sequence_are_both_kept():
    m = minimize(six_ops(), Counting(tanh_into_softmax), budget=60)
    assert [n.op for n in _live(m.sample)] == ["tanh", "softmax"]
    assert tanh_into_softmax(m.sample)


@pytest.mark.parametrize("budget", [0, 3, 7, 20])
def test_the_budget_bounds_probe_calls(budget):
    probe = Counting(lambda s: "mul" in s.graph.ops())
    m = minimize(six_ops("near-max", CHANNELS_LAST), probe, budget=budget)
    assert probe.calls == m.probes <= budget
    assert "mul" in m.sample.graph.ops()
    if budget == 0:
        assert m.sample.id == six_ops("near-max", CHANNELS_LAST).id and not m.steps


def test_the_minimized_sample_id_is_stable():
    a = minimize(six_ops(), Counting(tanh_into_softmax)).sample
    b = minimize(six_ops(), Counting(tanh_into_softmax)).sample
    assert a.id == b.id
    assert Sample.from_bytes(a.to_bytes()).id == a.id


def test_variants_that_matter_are_named_and_the_others_removed():
    def needs_large(s: Sample) -> bool:  # the failure needs exp's input at magnitudes near fp16's max
        return any(n.op == "exp" for n in _live(s)) and max(float(np.max(np.abs(v))) for v in s.values) > 1000
    m = minimize(six_ops("near-max", CHANNELS_LAST), Counting(needs_large))
    assert m.matters == ["near-max"]
    assert {x.layout for x in m.sample.graph.inputs} == {CONTIGUOUS}
    assert any(step.startswith("variant: channels-last removed") for step in m.steps)
    free = minimize(six_ops("near-max", CHANNELS_LAST), Counting(lambda s: "exp" in s.graph.ops()))
    assert free.matters == [] and free.sample.graph.inputs[0].range == "normal"


def test_values_are_simplified_when_the_failure_allows():
    m = minimize(six_ops(), Counting(lambda s: "exp" in s.graph.ops() and s.values[0].size >= 16))
    v = m.sample.values[0]
    assert v.size >= 16 and np.max(np.abs(v)) >= 1
    assert np.all(v == np.round(v)) and np.all(v != 0)  # small integers, none turned into 0
    assert any("small integers" in step for step in m.steps)


def test_value_rounding_keeps_signs_and_magnitudes():
    v = np.array([0.123456, -98765.4, 0.0, 3.0e-6, np.inf])
    assert np.array_equal(round_significant(v), np.array([0.123, -98800.0, 0.0, 3.0e-6, np.inf]))
    assert np.array_equal(small_integers(np.array([0.3, -0.2, 2.6, 0.0])), np.array([1.0, -1.0, 3.0, 0.0]))
    assert small_integers(np.array([0.3, 0.2])) is None  # all under 1: they would all become 1
    assert small_integers(np.array([1.0, 5000.0])) is None  # not exact in fp16


def test_dims_tied_by_size_are_then_shrunk_one_by_one():
    one = Sample(Graph((Input(TensorType((7, 7))),), (Node("softmax", (0,), attrs_of({"dim": 1})),), 1),
                 (np.arange(49.0).reshape(7, 7) / 10,))
    m = minimize(one, Counting(softmax_on_odd))
    assert m.sample.graph.inputs[0].type.shape == (1, 3) and m.matters == ["odd-size 3"]


def test_dims_that_were_dynamic_shrink_once_static():
    s = Sample(Graph((Input(TensorType((4, 6)), dynamic=(1,)),), (Node("exp", (0,)),), 1), (np.ones((4, 6)),))
    m = minimize(s, Counting(lambda c: "exp" in c.graph.ops()))
    assert m.steps[-2:] == ["variant: dynamic removed", "shape: every dim of size 2 -> 1"], m.steps
    assert m.sample.graph.inputs[0].type.shape == (1, 1) and not m.sample.graph.inputs[0].dynamic
