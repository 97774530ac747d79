"""The built-in examples on every backend and precision: each cell's status, its error as a multiple of torch
eager's at the same precision, and any coarser-than-requested / rounds-more finding (the false-alarm count of the
coarser rule on the examples, in BENCHMARKS.md).

Run: .venv/bin/python bench/examples_findings.py
"""
import fpdiff

PRECISIONS = ["fp32", "fp16", "bf16", "amp-fp16", "amp-bf16"]

for ex in ("tinycnn", "tinyformer", "rmsnorm", "router"):
    r = fpdiff.check(f"example:{ex}", backends=["torch", "inductor", "ort", "iree"], precisions=PRECISIONS,
                     shape_variants=["static"])
    for c in r.cells:
        kinds = [f.kind for f in c.findings if f.kind in ("coarser-than-requested", "rounds-more")]
        base = (c.baseline_metrics or {}).get("rel_l2")
        ratio = f"{c.metrics['rel_l2'] / base:.2f}x" if c.metrics and isinstance(base, float) and base else "-"
        print(ex, c.backend, c.precision, c.status, ratio, kinds, flush=True)
