"""Findings that are one bug, decided by running, never by names alone. A new failing graph that holds a known
finding's ops in order counts as a hit on it only when the graph cut down to those ops fails the same way; and two
findings of one backend, precision and verdict class are one root cause when the op that fails alone in one (its
culprit) also fails alone, the same way, on the other's values (ORT's Sigmoid tail showed as log(sigmoid),
sigmoid > rsqrt, sigmoid > div, ...: five signatures, one op)."""
from __future__ import annotations

from collections.abc import Callable

from fpdiff.analysis.fuzz.graph import Graph, Sample
from fpdiff.analysis.fuzz.minimize import cut

Probe = Callable[[Sample], bool]


def nodes_in_order(g: Graph, ops: list[str]) -> list[int] | None:
    """The indices of live nodes whose ops are `ops` in order (the first such match), or None."""
    live = g.live()
    picked: list[int] = []
    want = iter(ops)
    need = next(want, None)
    for i, n in enumerate(g.nodes):
        if need is None:
            break
        if g.value_of_node(i) in live and n.op == need:
            picked.append(i)
            need = next(want, None)
    return picked if need is None and picked else None


def holds(sample: Sample, ops: list[str], probe: Probe) -> bool:
    """Whether the sample, cut down to the nodes of `ops` (in order), still fails as the probe asks: a hit on a
    known finding confirmed by running."""
    nodes = nodes_in_order(sample.graph, ops)
    small = cut(sample, set(nodes)) if nodes else None
    return small is not None and probe(small)


def culprit(sample: Sample, probe: Probe) -> str | None:
    """The op of a minimized graph that fails alone (on its float64 inputs in the graph) as the probe asks; a graph
    of one op is its own culprit; None when no op fails alone."""
    live = [i for i in range(len(sample.graph.nodes)) if sample.graph.value_of_node(i) in sample.graph.live()]
    if len(live) == 1:
        return sample.graph.nodes[live[0]].op
    for i in live:
        small = cut(sample, {i})
        if small is not None and probe(small):
            return sample.graph.nodes[i].op
    return None


def fails_alone(sample: Sample, op: str, probe: Probe) -> bool:
    """Whether one node of this op in the sample fails alone as the probe asks."""
    g = sample.graph
    for i, n in enumerate(g.nodes):
        if n.op == op and g.value_of_node(i) in g.live():
            small = cut(sample, {i})
            if small is not None and probe(small):
                return True
    return False


def root_causes(found: list, probe_of: Callable[[object], Probe]) -> list:
    """The findings with those of one root cause merged into the one whose culprit explains them (hits summed, the
    merged signatures named in `merged`), in their order. `probe_of(finding)`: the probe for its backend, precision
    and verdict class. A finding without its minimized sample (read back from a report) is left as it is."""
    culprits: dict[str, str | None] = {}
    gone: set[str] = set()
    for y in sorted(found, key=lambda f: -len(f.ops)):
        if y.signature in gone or not y.sample:
            continue
        for x in found:
            if x is y or x.signature in gone or not x.sample or _cell(x) != _cell(y):
                continue
            if x.signature not in culprits:
                culprits[x.signature] = culprit(Sample.from_bytes(x.sample), probe_of(x))
            op = culprits[x.signature]
            if op and op in y.ops and fails_alone(Sample.from_bytes(y.sample), op, probe_of(y)):
                x.hits += y.hits
                x.matched += y.matched
                x.merged += [y.signature, *y.merged]
                gone.add(y.signature)
                break
    return [f for f in found if f.signature not in gone]


def _cell(f) -> tuple:
    return f.backend, f.precision, f.status_class
