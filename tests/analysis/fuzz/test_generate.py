"""Generation: the same seed gives the same sample anywhere; every graph types, runs in torch to the shape its ops
infer, feeds every op into the output, stays within its op bounds, has a finite float64 reference and one layout;
domain-limited arguments get values in their domain; the op filter and its bad patterns; a spread of ops, layouts,
dynamic dims and ranges over many seeds."""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fpdiff.analysis.fuzz import emit
from fpdiff.analysis.fuzz.generate import NO_GRAPH, NOT_FINITE, Discard, describe, generate, known_range
from fpdiff.analysis.fuzz.graph import FLOAT, ONNX, TORCH, Sample
from fpdiff.analysis.fuzz.vocab import ANY, NONZERO, POSITIVE, UNIT, VOCAB
from fpdiff.analysis.ops.case import CHANNELS_LAST, CONTIGUOUS, TRANSPOSED
from fpdiff.core.errors import UsageError

SEEDS = range(200)
# a share of seeds lost to a non-finite float64 reference or an unbuildable graph past this would make a campaign
# spend its time on discards (the default vocabulary loses about 1%)
MAX_DISCARD_SHARE = 0.05


@pytest.fixture(scope="module")
def made() -> dict[int, Sample | Discard]:
    return {s: generate(s) for s in SEEDS}


@pytest.fixture(scope="module")
def samples(made) -> list[Sample]:
    return [x for x in made.values() if isinstance(x, Sample)]


def test_the_same_seed_gives_the_same_sample_and_seeds_differ(made):
    again = {s: generate(s) for s in range(30)}
    for s, x in again.items():
        assert type(x) is type(made[s])
        if isinstance(x, Sample):
            assert x.id == made[s].id and describe(x) == describe(made[s])
            assert all(np.array_equal(a, b) for a, b in zip(x.values, made[s].values))
    ids = [x.id for x in made.values() if isinstance(x, Sample)]
    assert len(set(ids)) == len(ids)


def test_ids_are_the_same_in_another_process_with_another_hash_seed(made):
    code = ("import json; from fpdiff.analysis.fuzz.generate import generate; "
            "print(json.dumps([getattr(generate(s), 'id', None) for s in range(12)]))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [getattr(made[s], "id", None) for s in range(12)]


def test_few_seeds_are_discarded_and_each_says_why(made):
    lost = [x for x in made.values() if isinstance(x, Discard)]
    assert len(lost) <= MAX_DISCARD_SHARE * len(made)
    assert all(x.reason in (NOT_FINITE, NO_GRAPH) and made[x.seed] is x for x in lost)


def test_every_graph_runs_to_its_inferred_shape_with_a_finite_reference(samples):
    for x in samples:
        g = x.graph
        types = emit.value_types(g)
        out = emit.evaluate(x)
        assert out.shape == types[g.output].shape, describe(x)
        assert np.all(np.isfinite(out)), describe(x)
        for inp, v in zip(g.inputs, x.values):
            assert v.shape == inp.type.shape and (v.dtype == np.float64 or inp.type.dtype != FLOAT)
            assert known_range(inp.range), inp.range


def test_every_op_feeds_the_output_within_the_op_bounds(samples):
    for x in samples:
        g = x.graph
        assert g.output == len(g.inputs) + len(g.nodes) - 1
        assert g.live() == set(range(len(g.inputs) + len(g.nodes))), describe(x)
        assert 2 <= len(g.nodes) <= 6


def test_one_layout_per_graph_where_the_inputs_can_take_it(samples):
    for x in samples:
        layouts = {i.layout for i in x.graph.inputs}
        assert len(layouts) == 1
        ranks = [i.type.rank for i in x.graph.inputs if i.type.dtype == FLOAT]
        if CHANNELS_LAST in layouts:
            assert 4 in ranks
        if TRANSPOSED in layouts:
            assert max(ranks) >= 2


def test_dynamic_dims_are_real_dims_of_size_two_or_more(samples):
    for x in samples:
        for i in x.graph.inputs:
            assert all(0 <= d < i.type.rank and i.type.shape[d] > 1 for d in i.dynamic)


def test_arguments_with_a_domain_get_values_in_it(samples):
    """The guards and input ranges keep log's, div's, rsqrt's arguments where their float64 result is defined."""
    inside = {POSITIVE: lambda a: a > 0, NONZERO: lambda a: a != 0, UNIT: lambda a: np.abs(a) <= 1}
    checked = 0
    for x in samples:
        values = emit.values64(x)
        for node in x.graph.nodes:
            op = VOCAB[node.op]
            for j, a in enumerate(node.args):
                dom = op.domain[j] if j < len(op.domain) else ANY
                if dom != ANY:
                    v = values[a]
                    if a >= len(x.graph.inputs) and x.graph.nodes[a - len(x.graph.inputs)].op == "sigmoid":
                        v = v[v != 0]  # a sigmoid guard underflows to 0 below -745 in float64 (a -1e4 mask fill)
                    assert np.all(inside[dom](v)), f"{node.op} arg {j} outside {dom}: {describe(x)}"
                    checked += 1
    assert checked > 50  # the vocabulary's log, sqrt, div, reciprocal appear often enough to be checked


def test_the_op_filter_keeps_graphs_to_the_named_ops():
    for s in range(20):
        # names and catalog names in any case: an op whose ONNX form emits a Softmax (attention) is picked too
        x = generate(s, ops=["SOFTMAX", "Add", "nn.functional.relu"])
        assert isinstance(x, Sample) and x.graph.ops()
        assert all({"softmax", "add", "nn.functional.relu"} & {c.lower() for c in (op, *VOCAB[op].catalog)}
                   for op in x.graph.ops()), x.graph.ops()
    assert all(set(generate(s, ops=["tanh"]).graph.ops()) == {"tanh"} for s in range(5))


def test_a_pattern_matching_no_op_is_one_usage_error_with_the_closest_names():
    with pytest.raises(UsageError, match=r"'sofmax'.*closest: .*[Ss]oftmax"):
        generate(0, ops=["sofmax"])
    with pytest.raises(UsageError, match="nope"):
        generate(0, ops=["add", "nope*"])
    with pytest.raises(UsageError):
        generate(0, min_ops=4, max_ops=3)


def test_op_bounds_and_forms_are_kept():
    both = ["add", "mul", "exp", "tanh", "matmul", "sum", "gather", "where"]  # no name of a torch-only op's catalog
    for s in range(15):
        x = generate(s, min_ops=3, max_ops=3, form=ONNX)
        assert len(x.graph.nodes) == 3 and x.form == ONNX
        assert all(ONNX in VOCAB[op].forms for op in x.graph.ops())
        # over ops both forms have, the form does not move the graph
        assert generate(s, ops=both, min_ops=3, max_ops=3, form=TORCH).graph == \
            generate(s, ops=both, min_ops=3, max_ops=3, form=ONNX).graph
        assert generate(s, forms=(TORCH,)).form == TORCH


def test_a_reference_that_overflows_in_every_draw_is_a_discard():
    """exp(exp(exp(x))) overflows float64 for most draws: those seeds are discarded with the reason, never returned
    with infinities."""
    got = [generate(s, ops=["exp"], min_ops=4, max_ops=4) for s in range(12)]
    lost = [x for x in got if isinstance(x, Discard)]
    assert lost and all(x.reason == NOT_FINITE for x in lost)
    assert all(np.all(np.isfinite(emit.evaluate(x))) for x in got if isinstance(x, Sample))


def test_ops_layouts_dynamic_dims_ranges_and_fan_out_all_appear(samples):
    ops = collections.Counter(op for x in samples for op in x.graph.ops())
    layouts = collections.Counter(x.graph.inputs[0].layout for x in samples)
    ranges = collections.Counter(i.range for x in samples for i in x.graph.inputs)
    dynamic = sum(any(i.dynamic for i in x.graph.inputs) for x in samples)
    assert len(ops) >= 0.6 * len(VOCAB)
    assert min(layouts[k] for k in (CONTIGUOUS, CHANNELS_LAST, TRANSPOSED)) >= 5
    assert layouts[CONTIGUOUS] == max(layouts.values())  # contiguous mostly
    assert 0.1 * len(samples) <= dynamic <= 0.6 * len(samples)
    assert all(ranges[r] >= 5 for r in ("normal", "positive", "unit", "near-max", "tiny", "small-int"))
    assert sum(_fans_out(x) for x in samples) >= 0.1 * len(samples)
    assert {x.form for x in samples} == {TORCH, ONNX}
    several = [x for x in samples if x.graph.extra]  # dead branches returned as outputs
    assert 0.05 * len(samples) <= len(several) <= 0.4 * len(samples)
    assert all(len(x.graph.outputs) == len(set(x.graph.outputs)) for x in several)
    assert len({len(x.graph.nodes) for x in samples}) == 5  # 2..6 ops
    assert max(i.type.rank for x in samples for i in x.graph.inputs) >= 4  # 5: an embedding's rows, a mask
    assert any(1 in i.type.shape and i.type.rank >= 2 for x in samples for i in x.graph.inputs)  # broadcasting


def _fans_out(x: Sample) -> bool:
    uses = collections.Counter(a for n in x.graph.nodes for a in n.args)
    return max(uses.values()) > 1


def test_describe_is_one_line_naming_the_output_shape_layout_and_ranges(samples):
    for x in samples[:40]:
        line = describe(x)
        assert "\n" not in line and x.graph.nodes[-1].op in line and x.graph.inputs[0].layout in line
        shape = emit.value_types(x.graph)[x.graph.output].shape
        assert f"[{'x'.join(map(str, shape))}{']' if not x.graph.extra else ', '}" in line  # extra outputs follow
        assert all(i.range in line for i in x.graph.inputs if i.range != "normal")
        assert ("dyn:" in line) == any(i.dynamic for i in x.graph.inputs)
