"""`fpdiff locate` on torch eager against its floor (one float64 pass + one target pass), wall time and peak RSS.

Run: .venv/bin/python bench/bench_locate.py [--model bench/specs/wide_mlp.py] [--precision bf16] [--repeat 3]
Each measurement runs in its own fresh process (peak RSS is per process); the three run back to back in rounds,
and the table shows each one's median over the rounds, the ratios the median of each round's own ratio (on a
shared machine a round's three runs see about the same load).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import json, resource, sys, time
import torch
from fpdiff.sources import load
from fpdiff.core import precision as prec
what, model, p = sys.argv[1], sys.argv[2], prec.get(sys.argv[3])
src = load(model)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
m, x = src.module, src.inputs
t0, cpu0 = time.perf_counter(), sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
with torch.no_grad():
    if what == "fp64":
        m.double()(*(t.double() if t.is_floating_point() else t for t in x))
    elif what == "floor":
        import copy
        copy.deepcopy(m).double()(*(t.double() if t.is_floating_point() else t for t in x))
        m.to(p.dtype)(*(t.to(p.dtype) if t.is_floating_point() else t for t in x))
    elif what == "locate":
        from fpdiff.analysis.locate import analyse
        ops, err = analyse(m, x, p, own=True)
wall = time.perf_counter() - t0
cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"what": what, "wall_s": wall, "cpu_s": cpu, "peak_mb": peak / 1024, "base_mb": base / 1024}))
'''


def measure(what: str, model: str, precision: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, what, model, precision], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _grow(d: dict) -> float:
    return d["peak_mb"] - d["base_mb"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bench/specs/wide_mlp.py")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    whats = ("fp64", "floor", "locate")
    rounds = [{w: measure(w, a.model, a.precision) for w in whats} for _ in range(a.repeat)]
    print(f"model {a.model}, precision {a.precision}, medians of {a.repeat} rounds")
    med = lambda f, w: statistics.median(f(r[w]) for r in rounds)  # noqa: E731
    for w in whats:
        print(f"{w:7s} wall {med(lambda d: d['wall_s'], w):7.2f} s   cpu {med(lambda d: d['cpu_s'], w):7.2f} s   "
              f"peak RSS {med(lambda d: d['peak_mb'], w):8.0f} MB "
              f"(after loading: {med(lambda d: d['base_mb'], w):.0f} MB)")
    walls = [r["locate"]["wall_s"] / r["floor"]["wall_s"] for r in rounds]
    cpus = [r["locate"]["cpu_s"] / r["floor"]["cpu_s"] for r in rounds]
    peaks = [r["locate"]["peak_mb"] / r["fp64"]["peak_mb"] for r in rounds]
    grows = [_grow(r["locate"]) / _grow(r["fp64"]) for r in rounds]
    print(f"locate / floor wall: {statistics.median(walls):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in walls)})")
    print(f"locate / floor CPU time (user + system): {statistics.median(cpus):.2f}x "
          f"(rounds: {', '.join(f'{x:.2f}' for x in cpus)})")
    print(f"locate / float64 forward peak RSS: {statistics.median(peaks):.2f}x "
          f"(rounds: {', '.join(f'{x:.2f}' for x in peaks)}; growth over the loaded model: "
          f"{statistics.median(grows):.2f}x)")


if __name__ == "__main__":
    main()
