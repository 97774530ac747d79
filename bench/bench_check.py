"""`fpdiff check` wall time on the built-in examples, cold and warm compile cache, and where the time goes.

Run: .venv/bin/python bench/bench_check.py [--examples tinycnn,tinyformer] [--backends torch,inductor,ort,iree]
Cold = a fresh, empty cache directory (inductor's own cache is left alone: it is torch's, not fpdiff's).
Warm = the same run again on that cache. "in backends" = the cells' prepare+run time as the workers measured it
(export, compile, execution); the rest is fpdiff itself: worker start-up (importing torch), loading the model,
the reference run's bookkeeping, comparing and reporting.
"""
from __future__ import annotations

import argparse
import tempfile
import time

import fpdiff


def one(model: str, backends: list[str], precisions: list[str], cache: str) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    r = fpdiff.check(model, backends=backends, precisions=precisions, cache_dir=cache)
    wall = time.perf_counter() - t0
    inside = sum(c.duration_s for c in r.cells) + r.reference["duration_s"]
    return wall, inside, len(r.cells)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--examples", default="tinycnn,tinyformer,rmsnorm,router")
    ap.add_argument("--backends", default="torch,inductor,ort,iree")
    ap.add_argument("--precisions", default="fp32,fp16,bf16")
    a = ap.parse_args()
    backends, precisions = a.backends.split(","), a.precisions.split(",")
    print(f"backends={a.backends} precisions={a.precisions}")
    print(f"{'model':22s} {'cells':>5s} {'cold s':>8s} {'warm s':>8s} {'warm/cold':>9s} "
          f"{'cold in backends':>16s} {'warm in backends':>16s}")
    for ex in a.examples.split(","):
        cache = tempfile.mkdtemp(prefix="fpdiff-bench-")
        cw, ci, n = one(f"example:{ex}", backends, precisions, cache)
        ww, wi, _ = one(f"example:{ex}", backends, precisions, cache)
        print(f"{'example:' + ex:22s} {n:5d} {cw:8.1f} {ww:8.1f} {ww / cw:9.2f} "
              f"{ci:8.1f} ({ci / cw:4.0%}) {wi:8.1f} ({wi / ww:4.0%})")


if __name__ == "__main__":
    main()
