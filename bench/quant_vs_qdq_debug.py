"""fpdiff quant beside ONNX Runtime's own quantization debugger (onnxruntime.quantization.qdq_loss_debug) on the same
QDQ model: what each reports and the time each takes, as whole processes.

Each model is exported to ONNX, pre-processed and quantized once (quant_pre_process, quantize_static QDQ per channel,
the settings fpdiff's ort backend uses), calibrated on seeded inputs. Then:
- ORT's debugger: the float and the QDQ model each augmented so every activation is an output, run on the judged
  inputs, activations matched by name, SQNR per tensor (its compute_activation_error): one number per tensor that
  mixes what the format costs with anything ORT's kernels do;
- fpdiff: `fpdiff quant MODEL --schemes '' --artifact ort=q.onnx`: the same file judged against float64, with the
  format's cost (its exact emulation) apart from ORT's departure, kernel by kernel in steps.

Run: .venv/bin/python bench/quant_vs_qdq_debug.py [--models tinycnn,tinyformer] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEBUGGER = r'''
import json, sys, time, numpy as np, torch
t0 = time.perf_counter()
from onnxruntime.quantization import qdq_loss_debug as dbg
from onnxruntime.quantization import CalibrationDataReader
pre, q, x = sys.argv[1], sys.argv[2], np.load(sys.argv[3])
class One(CalibrationDataReader):
    def __init__(self): self.it = iter([{k: x[k] for k in x.files}])
    def get_next(self): return next(self.it, None)
dbg.modify_model_output_intermediate_tensors(pre, pre + ".aug.onnx")
dbg.modify_model_output_intermediate_tensors(q, q + ".aug.onnx")
fl = dbg.collect_activations(pre + ".aug.onnx", One())
qd = dbg.collect_activations(q + ".aug.onnx", One())
err = dbg.compute_activation_error(dbg.create_activation_matching(qd, fl))
sqnr = {k: float(v["xmodel_err"]) for k, v in err.items() if "xmodel_err" in v}
print(json.dumps({"tensors": len(sqnr), "worst_sqnr_db": min(sqnr.values()), "median_sqnr_db":
                  float(np.median(list(sqnr.values()))), "seconds": time.perf_counter() - t0}))
'''


def prepare(name: str, work: Path) -> tuple[Path, Path, Path]:
    """(pre-processed float model, its QDQ model, the judged inputs) for an example model."""
    import numpy as np
    import onnx
    import torch
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from fpdiff.sources import load
    src = load(f"example:{name}")
    names = list(src.input_names)
    torch.onnx.export(src.module, tuple(src.inputs), str(work / "fp32.onnx"), input_names=names, dynamo=False)
    onnx.save(onnx.load(str(work / "fp32.onnx")), str(work / "whole.onnx"))
    quant_pre_process(str(work / "whole.onnx"), str(work / "pre.onnx"), skip_symbolic_shape=True)
    g = torch.Generator().manual_seed(10_000)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter([{n: (torch.randn(t.shape, generator=g) * t.std() + t.mean()).numpy()
                             for n, t in zip(names, src.inputs)} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)
    quantize_static(str(work / "pre.onnx"), str(work / "q.onnx"), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)
    np.savez(work / "x.npz", **{n: t.numpy() for n, t in zip(names, src.inputs)})
    return work / "pre.onnx", work / "q.onnx", work / "x.npz"


def timed(cmd: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, out.stdout + out.stderr


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="tinycnn,tinyformer")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    rows = []
    for name in a.models.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"fpdiff-vs-qdq-{name}-"))
        pre, q, x = prepare(name, work)
        (work / "dbg.py").write_text(DEBUGGER)
        theirs, ours, said, report = [], [], {}, {}
        for _ in range(a.repeat):
            s, out = timed([sys.executable, str(work / "dbg.py"), str(pre), str(q), str(x)])
            theirs.append(s)
            said = json.loads(out.strip().splitlines()[-1])
            s, _ = timed([sys.executable, "-m", "fpdiff", "quant", f"example:{name}", "--schemes", "",
                          "--artifact", f"ort={q}", "--no-store", "--json", str(work / "fpdiff.json")])
            ours.append(s)
            report = json.loads((work / "fpdiff.json").read_text())["cells"][0]
        m = report.get("metrics") or {}
        rows.append({"model": name, "qdq_loss_debug_s": sorted(theirs)[len(theirs) // 2], "fpdiff_s":
                     sorted(ours)[len(ours) // 2], "qdq_loss_debug": said, "fpdiff": {
                         "status": report["status"], "quantization_loss": m.get("quantization_loss"),
                         "departure": m.get("departure"), "kernel_steps": m.get("kernel_steps"),
                         "kernels": m.get("kernels"), "findings": [f["kind"] for f in report.get("findings", [])]}})
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
