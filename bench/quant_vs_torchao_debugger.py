"""fpdiff quant beside torchao's PT2E numeric debugger on the same models quantized the same way (ExecuTorch's
XNNPACKQuantizer through PT2E): what each reports and the time each takes, as whole processes.

- torchao's debugger (generate_numeric_debug_handle, prepare_for_propagation_comparison, compare_results): the float
  program and the converted (quantized reference) program each log every node, run on the judged inputs, SQNR per
  node. It compares torch's own reference of the quantized program with the float model: one number per node that is
  what the format costs, and it never runs the program the backend runs;
- fpdiff: `fpdiff quant MODEL --backends executorch --schemes FORMAT`: the .pte ExecuTorch runs, judged against
  float64, with the format's cost (the exact emulation) apart from the backend's departure.

Run: .venv/bin/python bench/quant_vs_torchao_debugger.py [--models example:tinycnn,...] [--schemes int8,int8-dynamic]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = ("example:tinycnn", "example:tinyformer", str(HERE.parent / "tests" / "specs" / "quant_silu_square.py"))

DEBUGGER = r'''
import json, sys, time, importlib.util, torch
t0 = time.perf_counter()
from torchao.quantization.pt2e import (compare_results, extract_results_from_loggers, generate_numeric_debug_handle,
                                       prepare_for_propagation_comparison)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
where, scheme = sys.argv[1], sys.argv[2]
if where.startswith("example:"):
    import importlib; spec = importlib.import_module("fpdiff.examples." + where.split(":")[1])
else:
    s = importlib.util.spec_from_file_location("m", where)
    spec = importlib.util.module_from_spec(s)
    s.loader.exec_module(spec)
model, x = spec.model().eval(), spec.inputs()
ep = torch.export.export(model, x)
generate_numeric_debug_handle(ep)
config = get_symmetric_quantization_config(is_per_channel=True, is_dynamic=scheme == "int8-dynamic")
q = XNNPACKQuantizer().set_global(config)
prepared = prepare_pt2e(ep.module(), q)
g = torch.Generator().manual_seed(0)
for _ in range(8):
    prepared(*[t.std() * torch.randn(t.shape, generator=g) + t.mean() if t.is_floating_point() else t
               for t in x])
converted = convert_pt2e(prepared)
ref, act = prepare_for_propagation_comparison(ep.module()), prepare_for_propagation_comparison(converted)
with torch.no_grad():
    ref(*x); act(*x)
def flat(v):  # a node with several outputs (chunk) has one SQNR each
    return [y for z in v for y in flat(z)] if isinstance(v, (list, tuple)) else [float(v)]
compared = compare_results(extract_results_from_loggers(ref), extract_results_from_loggers(act))
sqnr = [y for s in compared.values() for r in s.results for y in flat(r.sqnr) if abs(y) != float("inf") and y == y]
print(json.dumps({"nodes": len(sqnr), "worst_sqnr_db": min(sqnr), "last_sqnr_db": sqnr[-1],
                  "seconds": time.perf_counter() - t0}))
'''


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - t, done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--schemes", default="int8,int8-dynamic")
    a = ap.parse_args()
    py = sys.executable
    fpdiff = str(Path(py).with_name("fpdiff"))
    print("| model | format | torchao debugger (s) | fpdiff quant (s) | ratio | what the debugger says "
          "| what fpdiff says |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            for scheme in a.schemes.split(","):
                t_dbg, d = timed([py, "-c", DEBUGGER, model, scheme])
                if d.returncode:
                    said = f"failed: {d.stderr.strip().splitlines()[-1][:120]}"
                else:
                    r = json.loads(d.stdout.strip().splitlines()[-1])
                    said = (f"{r['nodes']} nodes, worst SQNR {r['worst_sqnr_db']:.1f} dB, output "
                            f"{r['last_sqnr_db']:.1f} dB")
                out = Path(tmp) / "q.json"
                t_fp, f = timed([fpdiff, "quant", model, "--backends", "executorch", "--schemes", scheme, "--no-store",
                                 "--cache-dir", str(Path(tmp) / "cache"), "--json", str(out)])
                if out.exists():
                    (c,) = json.loads(out.read_text())["cells"]
                    m = c.get("metrics") or {}
                    measured = m.get("quantization_loss") is not None
                    verdict = c["status"] + (f": loss {m['quantization_loss']:.3g}, departure {m['departure']:.3g}"
                                             if measured else f" ({c['reason'][:80]})")
                else:
                    verdict = f"exit {f.returncode}: {f.stderr.strip()[-120:]}"
                name = model.split("/")[-1]
                print(f"| {name} | {scheme} | {t_dbg:.1f} | {t_fp:.1f} | {t_fp / t_dbg:.2f} | {said} | {verdict} |",
                      flush=True)


if __name__ == "__main__":
    main()
