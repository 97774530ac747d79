"""What the fuzzer's generator makes over many seeds: graphs and discards, dynamic dims (how many axes), graphs of
several outputs, graphs with an integer or mask value, the forms, and how often each op appears. No backend runs.

    python bench/fuzz_vocab_stats.py [--seeds 1000]
"""
from __future__ import annotations

import argparse
import collections
import time

from fpdiff.analysis.fuzz.emit import value_types
from fpdiff.analysis.fuzz.generate import generate
from fpdiff.analysis.fuzz.graph import BOOL, INT64
from fpdiff.analysis.fuzz.vocab import VOCAB


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=1000)
    a = p.parse_args()
    t0, ops, discards, axes, forms = time.perf_counter(), collections.Counter(), collections.Counter(), \
        collections.Counter(), collections.Counter()
    graphs = several = integers = 0
    for seed in range(a.seeds):
        x = generate(seed)
        if not hasattr(x, "graph"):
            discards[x.reason] += 1
            continue
        graphs += 1
        forms[x.form] += 1
        g = x.graph
        dims = {(i.type.rank - d, i.type.shape[d]) for i in g.inputs for d in i.dynamic}
        if dims:
            axes["1" if len(dims) == 1 else "2" if len(dims) == 2 else "3+"] += 1
        several += bool(g.extra)
        integers += any(t.dtype in (INT64, BOOL) for t in value_types(g))
        ops.update(set(g.ops()))
    print(f"{a.seeds} seeds in {time.perf_counter() - t0:.1f} s: {graphs} graphs, discarded {dict(discards)}")
    print(f"dynamic dims: {sum(axes.values())} graphs (distinct dynamic axes: {dict(sorted(axes.items()))}); "
          f"several outputs: {several}; an int64 or bool value: {integers}; forms: {dict(forms)}")
    print(f"ops used: {len(ops)} of {len(VOCAB)}; rarest: {ops.most_common()[-5:]}")


if __name__ == "__main__":
    main()
