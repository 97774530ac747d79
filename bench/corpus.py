"""The real-architecture corpus: transformers models (small random-init configs, and the trained all-MiniLM-L6-v2)
and the ONNX models shipped in the onnx wheel, each checked on every backend at fp32/fp16/bf16, so what a real
model meets on its way through exporters, importers and compilers is measured, not assumed.

Run: .venv/bin/python bench/corpus.py [--models gpt2,light_squeezenet] [--precisions fp32,fp16,bf16]
                                      [--backends torch,inductor,ort,iree,openvino] [--md out.md] [--json out.json]
Torch models (bench/specs/corpus/*.py) run on torch, inductor, ort and iree against torch eager in float64; ONNX
models (onnx/backend/test/data/light/*.onnx) on ort and iree against the ONNX reference evaluator in float64.
A cell shows its status and relative L2 against float64; a failed cell names the component and stage that failed
(the list below the table gives each message). Nothing is downloaded (HF_HUB_OFFLINE=1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the corpus builds from configs and wheels: never download

HERE = Path(__file__).resolve().parent
SPECS = HERE / "specs" / "corpus"
TORCH_BACKENDS = ("torch", "inductor", "ort", "iree", "openvino")
ONNX_BACKENDS = ("ort", "iree", "openvino")  # onnxref is the judge of ONNX models, not a cell
PRECISIONS = ("fp32", "fp16", "bf16")
# Short names of the statuses in the table; a failed cell adds "COMPONENT @ STAGE".
SHORT = {"pass": "pass", "precision-loss": "loss", "mismatch": "MISMATCH", "unsupported": "unsupp", "error": "ERROR",
         "crash": "CRASH", "timeout": "TIMEOUT"}


def onnx_models() -> dict[str, Path]:
    """The light ONNX models of the onnx wheel's backend test data (opset 9, 224x224 images)."""
    import onnx
    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return {p.stem: p for p in sorted(root.glob("*.onnx"))}


def torch_models() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SPECS.glob("*.py"))}


def run_model(name: str, path: Path, backends: list[str], precisions: list[str], cache: str | None,
              timeout: float) -> dict:
    """One model's grid through fpdiff.check; a failure of the reference itself is reported, not raised."""
    import fpdiff
    t0 = time.perf_counter()
    try:
        r = fpdiff.check(str(path), backends=backends, precisions=precisions, cache_dir=cache, timeout=timeout)
    except Exception as e:  # the float64 reference or the model itself failed: one line for this model
        return {"model": name, "error": f"{type(e).__name__}: {' '.join(str(e).split())[:400]}",
                "duration_s": round(time.perf_counter() - t0, 1), "cells": []}
    cells = []
    for c in r.cells:
        d = c.as_dict()
        cells.append({k: d.get(k) for k in ("backend", "precision", "status", "reason", "stage", "component",
                                            "duration_s")}
                     | {"rel_l2": (c.metrics or {}).get("rel_l2"),
                        "info": {k: v for k, v in c.info.items() if k in (
                            "onnx_exporter", "onnx_exporter_why", "iree_import", "iree_import_why",
                            "requested_dtype_share")},
                        "findings": [f["kind"] for f in d.get("findings", [])]})
    return {"model": name, "duration_s": round(time.perf_counter() - t0, 1), "cells": cells}


def cell_text(c: dict) -> str:
    s = SHORT.get(c["status"], c["status"])
    if c.get("rel_l2") is not None:
        rl = c["rel_l2"]
        s += f" {rl:.1e}" if isinstance(rl, float) else f" {rl}"
    if c.get("component") and c["status"] not in ("pass", "precision-loss", "mismatch"):
        s += f" ({c['component']} @ {c['stage']})" if c.get("stage") else f" ({c['component']})"
    if (c.get("info") or {}).get("onnx_exporter") == "torchscript":
        s += " [TS export]"  # the dynamo exporter failed; the graph came from the TorchScript exporter
    if (c.get("info") or {}).get("iree_import") == "iree-turbine":
        s += " [turbine]"
    return s


def markdown(results: list[dict], precisions: list[str], command: str) -> str:
    """Two tables (torch models, ONNX models): a row per model, a column per backend x precision; then the
    message of every cell that did not pass."""
    out = [f"Command: `{command}`", ""]
    for title, backends, kind in (("torch models (transformers)", TORCH_BACKENDS, "torch"),
                                  ("ONNX models (onnx wheel, light_*)", ONNX_BACKENDS, "onnx")):
        rows = [r for r in results if r.get("kind") == kind]
        if not rows:
            continue
        cols = [(b, p) for b in backends for p in precisions]
        out += [f"**{title}**", "", "| model | " + " | ".join(f"{b} {p}" for b, p in cols) + " | s |",
                "|---" * (len(cols) + 2) + "|"]
        for r in rows:
            if r.get("error"):
                out.append(f"| {r['model']} | " + " | ".join("-" for _ in cols) + f" | {r['duration_s']:.0f} |")
                continue
            by = {(c["backend"], c["precision"]): c for c in r["cells"]}
            out.append(f"| {r['model']} | " + " | ".join(cell_text(by[k]) if k in by else "-" for k in cols)
                       + f" | {r['duration_s']:.0f} |")
        out.append("")
    notes = []
    for r in results:
        if r.get("error"):
            notes.append(f"- {r['model']}: the model or its float64 reference failed: {r['error']}")
        for c in r["cells"]:
            if c["status"] != "pass":
                notes.append(f"- {r['model']} {c['backend']} {c['precision']}: {c['status']}: "
                             f"{' '.join((c['reason'] or '').split())[:300]}")
            why = (c.get("info") or {}).get("onnx_exporter_why") or (c.get("info") or {}).get("iree_import_why")
            if why and c["precision"] == "fp32":
                notes.append(f"- {r['model']} {c['backend']}: fallback used because {why[:200]}")
    if notes:
        out += ["Cells that did not pass, and fallbacks used:", ""] + notes + [""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated names (spec stems and light_* ONNX names); default: all")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--backends", help="restrict the backends (torch models: torch,inductor,ort,iree,openvino; "
                    "ONNX: ort,iree,openvino)")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="seconds per cell (the trained MiniLM at bf16 inlines 22M weights for IREE)")
    ap.add_argument("--cache-dir", help="compile cache (default: fpdiff's)")
    ap.add_argument("--md", help="write the markdown table here too")
    ap.add_argument("--json", help="write every cell (status, rel L2, stage, component, reason) here")
    a = ap.parse_args(argv)
    precisions = a.precisions.split(",")
    catalog = {**{n: ("torch", p) for n, p in torch_models().items()},
               **{n: ("onnx", p) for n, p in onnx_models().items()}}
    names = a.models.split(",") if a.models else list(catalog)
    unknown = [n for n in names if n not in catalog]
    if unknown:
        print(f"unknown models: {', '.join(unknown)}; known: {', '.join(catalog)}", file=sys.stderr)
        return 2
    wanted = set(a.backends.split(",")) if a.backends else None
    results = []
    for name in names:
        kind, path = catalog[name]
        backends = [b for b in (TORCH_BACKENDS if kind == "torch" else ONNX_BACKENDS) if not wanted or b in wanted]
        if not backends:
            continue
        r = run_model(name, path, backends, precisions, a.cache_dir, a.timeout)
        r["kind"] = kind
        results.append(r)
        print(f"{name}: {r['duration_s']:.0f}s " + (r.get("error") or "  ".join(
            f"{c['backend']}/{c['precision']}={cell_text(c)}" for c in r["cells"])), flush=True)
    command = "python bench/corpus.py " + " ".join(argv if argv is not None else sys.argv[1:])
    md = markdown(results, precisions, command.strip())
    print()
    print(md)
    if a.md:
        Path(a.md).write_text(md + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
