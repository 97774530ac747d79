"""`fpdiff locate` on torch eager against its floor (one float64 pass + one target pass), wall time and peak RSS.

Run: .venv/bin/python bench/bench_locate.py [--model bench/specs/wide_mlp.py] [--precision bf16]
Each measurement runs in its own fresh process (peak RSS is per process); all run back to back in one go.
"""
from __future__ import annotations

import argparse
import json
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
t0 = time.perf_counter()
with torch.no_grad():
    if what == "fp64":
        m.double()(*(t.double() for t in x))
    elif what == "floor":
        import copy
        copy.deepcopy(m).double()(*(t.double() for t in x))
        m.to(p.dtype)(*(t.to(p.dtype) for t in x))
    elif what == "locate":
        from fpdiff.analysis.locate import analyse
        ops, err = analyse(m, x, p, own=True)
wall = time.perf_counter() - t0
print(json.dumps({"what": what, "wall_s": wall, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "base_mb": base / 1024}))
'''


def measure(what: str, model: str, precision: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, what, model, precision], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="bench/specs/wide_mlp.py")
    ap.add_argument("--precision", default="bf16")
    a = ap.parse_args()
    r = {w: measure(w, a.model, a.precision) for w in ("fp64", "floor", "locate")}
    print(f"model {a.model}, precision {a.precision}")
    for w, d in r.items():
        print(f"{w:7s} wall {d['wall_s']:7.2f} s   peak RSS {d['peak_mb']:8.0f} MB "
              f"(after loading: {d['base_mb']:.0f} MB)")
    print(f"locate / floor wall: {r['locate']['wall_s'] / r['floor']['wall_s']:.2f}x")
    grow = lambda d: d["peak_mb"] - d["base_mb"]  # noqa: E731
    print(f"locate / float64 forward peak RSS: {r['locate']['peak_mb'] / r['fp64']['peak_mb']:.2f}x "
          f"(growth over the loaded model: {grow(r['locate']) / grow(r['fp64']):.2f}x)")


if __name__ == "__main__":
    main()
