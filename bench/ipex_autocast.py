"""IPEX's answer to a model whose .half() fails: autocast, and what it costs or gains against fp32, side by side in
one process. Runs in the IPEX interpreter (make ipex-env):

    .venv-ipex/bin/python bench/ipex_autocast.py [--batch 512] [--reps 30]

The model is tests/specs/prototype_cdist.py's prototype classifier at a serving size (64 -> 1024 -> 1024 -> 256
embedding, 100 prototypes), with cdist's exact pairwise kernel (`compute_mode="donot_use_mm_for_euclid_dist"`; by
default cdist takes a matmul shortcut above 25 rows, which has fp16 kernels): that kernel has no Half/BFloat16 CPU
version, so fp16 and bf16 casts fail and autocast (which runs cdist in fp32) is the remedy. Prints median ms per
batch, the ratio to fp32, and each variant's relative L2 against float64."""
from __future__ import annotations

import argparse
import statistics
import time

import torch


class Prototypes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Sequential(torch.nn.Linear(64, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024),
                                         torch.nn.GELU(), torch.nn.Linear(1024, 256))
        self.prototypes = torch.nn.Parameter(torch.randn(100, 256))

    def forward(self, x):
        # the exact pairwise kernel (no matmul shortcut): the one without Half/BFloat16 CPU kernels
        return -torch.cdist(self.embed(x), self.prototypes, compute_mode="donot_use_mm_for_euclid_dist")


def timed(fn, x, reps: int) -> float:
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn(x)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    import copy

    import intel_extension_for_pytorch as ipex
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = Prototypes().eval()
    x = torch.randn(a.batch, 64)
    with torch.no_grad():
        ref = copy.deepcopy(model).double()(x.double())
    variants = {"fp32 (ipex.optimize)": (ipex.optimize(copy.deepcopy(model), dtype=torch.float32), None)}
    for name, dt in (("amp-bf16", torch.bfloat16), ("amp-fp16", torch.float16)):
        try:
            m = ipex.optimize(copy.deepcopy(model), dtype=dt)
        except AssertionError:  # fp16 prepacking needs AVX512-FP16/AVX-NE-CONVERT: IPEX asks for this instead
            m = ipex.optimize(copy.deepcopy(model), dtype=dt, weights_prepack=False)
        variants[name] = (m, dt)
    for name, dt in (("fp16 (.half())", torch.float16), ("bf16 (.bfloat16())", torch.bfloat16)):
        try:
            with torch.no_grad():
                copy.deepcopy(model).to(dt)(x.to(dt))
            print(f"{name}: runs")
        except Exception as e:
            print(f"{name}: fails: {str(e).splitlines()[0]}")
    base = None
    print(f"torch {torch.__version__}, ipex {ipex.__version__}, batch {a.batch}, {a.reps} reps, median ms")
    for name, (m, dt) in variants.items():
        def run(inp, m=m, dt=dt):
            if dt is None:
                return m(inp)
            with torch.autocast("cpu", dtype=dt):
                return m(inp)
        ms = timed(run, x, a.reps)
        base = base or ms
        with torch.no_grad():
            out = run(x).double()
        err = float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))
        print(f"  {name:22s} {ms:8.2f} ms   {base / ms:5.2f}x fp32's throughput   rel L2 vs float64 {err:.2e}")


if __name__ == "__main__":
    main()
