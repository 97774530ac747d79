"""plan's end-to-end evaluations, before and after ranking by first-order error shares, side by side in one run.

Both searches start from the same program, float64 outputs and trials (torch eager, in this process): the earlier
search (evidence from ranges and locate; doubling along the ranking, halving back; shrink by halves then one op
at a time) and the current one (`Search.run` with each op's share of the error). Each row: evaluations, wall
(evidence and search), ops kept, the kept set's verified error, and the pure precision's error.

    python bench/bench_plan_evals.py [--models mobilenet_v2,t5,llama,mobilenet_v2_bf16,gemma2]
"""
from __future__ import annotations

import argparse
import time

from fpdiff.analysis.plan.jobs import Jobs
from fpdiff.analysis.plan.search import Search
from fpdiff.analysis.plan.torch_models import TorchTrials, _float64_outputs, evidence, units_of
from fpdiff.backends import registry
from fpdiff.core import precision as prec
from fpdiff.core.paths import cache_root
from fpdiff.model.mixed import program_module
from fpdiff.runtime import rundir
from fpdiff.sources import load

# (spec, precision, tolerance): MobileNetV2 at fp16 misses the default 1e-2 by itself; T5 and Llama pass fp16's
# default, so the tolerance is forced down as in BENCHMARKS.md's debugging chain (every trial runs).
# MobileNetV2 at bf16 misses bf16's default tolerance as well; Gemma2 is the third decoder (soft-capped logits).
MODELS = {"mobilenet_v2": ("bench/specs/corpus/mobilenet_v2.py", "fp16", None),
          "t5": ("bench/specs/corpus/t5.py", "fp16", 2.5e-4),
          "llama": ("bench/specs/corpus/llama.py", "fp16", 2.5e-4),
          "mobilenet_v2_bf16": ("bench/specs/corpus/mobilenet_v2.py", "bf16", None),
          "gemma2": ("bench/specs/corpus/gemma2.py", "fp16", 2.5e-4)}


class EarlierSearch(Search):
    """The search as it was before shares: grow by doubling along the ranking from the strong ops, then shrink by
    halves and one op at a time."""

    def run(self, ranked, strong, sources=(), share=None):
        if self.passes(()):
            return frozenset()
        for first in (frozenset(sources), frozenset(strong)):
            if first and self.passes(first):
                return self._shrink(first, ranked)
        if not self.passes(frozenset(self.names)):
            return None
        keep = frozenset(strong)
        order = [n for n in ranked if n not in keep] + [n for n in self.names if n not in keep and n not in ranked]
        return self._shrink(self._double(keep, order), ranked)

    def _double(self, base, order):
        m, last_fail = 1, 0
        while m < len(order) and not self.passes(base | frozenset(order[:m])):
            last_fail, m = m, m * 2
        m = min(m, len(order))
        lo, hi = last_fail + 1, m
        while lo < hi:
            mid = (lo + hi) // 2
            if self.passes(base | frozenset(order[:mid])):
                hi = mid
            else:
                lo = mid + 1
        return base | frozenset(order[:hi])

    def _shrink(self, keep, ranked):
        rank = {n: i for i, n in enumerate(ranked)}
        items = sorted(keep, key=lambda n: -rank.get(n, len(rank) + self.names.index(n)))
        chunk = len(items) // 2
        while chunk >= 2:
            i = 0
            while i < len(items):
                rest = items[:i] + items[i + chunk:]
                if rest and self.passes(rest):
                    items = rest
                else:
                    i += chunk
            chunk //= 2
        for n in list(items):
            rest = [x for x in items if x != n]
            if self.passes(rest):
                items = rest
        return frozenset(items)


def one(name: str, kind: type[Search], shares: bool) -> dict:
    """One search on one model: its evaluations, wall, kept ops and verified error."""
    path, precision, tol = MODELS[name]
    p = prec.get(precision)
    src = load(path, seed=0)
    tol = tol or src.tolerance.get(p.name, p.tolerance)
    gm = program_module(src.module, src.inputs, p)
    units = units_of(gm)
    expected = _float64_outputs(src.module, src.inputs)
    jobs = Jobs("cpu", (), {}, 600.0, str(cache_root()))
    trials = TorchTrials(jobs, "torch", gm, src, expected, p, tol, registry(()).create("torch"))
    t0 = time.perf_counter()
    search = kind(units, trials, tol)
    found = frozenset()
    if not search.passes(()):
        ranked, strong, sources, _, _, share = evidence(src.module, src.inputs, p, units, gm if shares else None)
        found = search.run(ranked, strong, sources, share)
    final = search.trial(found) if found is not None else None
    return {"evals": len(search.trials), "wall": time.perf_counter() - t0, "units": len(units),
            "kept": None if found is None else len(found), "error": final.error if final else None,
            "passed": bool(final and final.passed), "pure": search.trials[frozenset()].error, "tol": tol,
            "set": found}


@rundir.scoped
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    names = ap.parse_args().models.split(",")
    print("| model (units), tolerance | pure error | before: evaluations, wall s, kept, error | "
          "after: evaluations, wall s, kept, error | evaluations after/before | same kept set |")
    print("|---|---|---|---|---|---|")
    for name in names:
        b, a = one(name, EarlierSearch, False), one(name, Search, True)
        cell = "{evals}, {wall:.1f}, {kept}, {error:.3g}{ok}"
        print(f"| {name} ({a['units']}), {a['tol']:g} | {a['pure']:.3g} | "
              f"{cell.format(**b, ok='' if b['passed'] else ' (fails)')} | "
              f"{cell.format(**a, ok='' if a['passed'] else ' (fails)')} | {a['evals'] / b['evals']:.2f} | "
              f"{'yes' if a['set'] == b['set'] else 'no'} |", flush=True)


if __name__ == "__main__":
    main()
