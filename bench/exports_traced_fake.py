"""Programs exported from fake weights against the export of a real cast copy, on every torch spec of the corpus.

Run: .venv/bin/python bench/exports_traced_fake.py [--models llama,t5] [--precisions fp16,bf16]
For each model and precision: whether the fake trace was taken (no fallback to a cast copy), whether its graph is
the cast copy's node for node, and whether the program with the model's own weights cast per op gives the same
outputs bit for bit (under no_grad, as fpdiff runs programs: a grad-requiring weight picks another attention kernel
on the CPU). A refusal is printed with the exporter's first words.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from torch.utils._pytree import tree_leaves

from fpdiff.core import precision as prec
from fpdiff.model import graph, weights
from fpdiff.sources.spec import load_spec

SPECS = Path(__file__).resolve().parent / "specs" / "corpus"


def same(a, b) -> bool:
    return all(torch.equal(x.nan_to_num(), y.nan_to_num()) for x, y in zip(tree_leaves(a), tree_leaves(b)))


def row(name: str, p: prec.Precision) -> str:
    src = load_spec(SPECS / f"{name}.py", name, 0)
    x = graph.cast_inputs(src.inputs, p)
    try:
        real = graph.export(src.module, src.inputs, p, graph.STATIC, None)
        fake, origin = weights.fake_copy(src.module, p.dtype)
        traced = torch.export.export(fake, x, strict=False)
        taken = weights.lazy_program(traced, origin)
        lazy = graph.export(src.module, src.inputs, p, graph.STATIC, None, lazy=True)
        with torch.no_grad():
            equal = same(real.module()(*x), lazy.module()(*x))
        return (f"{name:14s} {p.name}  fake trace taken: {taken}  same graph: {str(real.graph) == str(traced.graph)}"
                f"  same outputs: {equal}")
    except Exception as e:  # noqa: BLE001 - the exporter's refusal, reported
        return f"{name:14s} {p.name}  refused: {type(e).__name__}: {' '.join(str(e).split())[:120]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(sorted(p.stem for p in SPECS.glob("*.py"))))
    ap.add_argument("--precisions", default="fp16,bf16")
    a = ap.parse_args()
    for name in a.models.split(","):
        for pn in a.precisions.split(","):
            print(row(name, prec.get(pn)), flush=True)


if __name__ == "__main__":
    main()
