"""Where does ONNX Runtime at fp16 depart? fpdiff locate vs Polygraphy's mark-all comparison, same ONNX model
and inputs, side by side in one run (wall time and peak RSS from /usr/bin/time; each tool in its own process).

Run: .venv/bin/python bench/bench_vs_polygraphy.py   (needs `pip install polygraphy==0.53.6`: `make bench` does)
Polygraphy: `run fp32.onnx --onnxrt --onnx-outputs mark all --save-outputs ref.json`, then
`run fp16.onnx --onnxrt --onnx-outputs mark all --load-outputs ref.json` (its default tolerances, atol=rtol=1e-5,
and with --atol/--rtol 1e-2 as a looser try). fpdiff: `locate fp32.onnx --backend ort --precision fp16` with
--mark-all, and with its default segment bisection.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BIN = Path(sys.executable).parent


def timed(cmd: list[str]) -> tuple[float, float, str, int]:
    out = subprocess.run(["/usr/bin/time", "-f", "TIME %e %M", *cmd], capture_output=True, text=True)
    m = re.search(r"TIME ([\d.]+) (\d+)", out.stderr)
    return float(m.group(1)), int(m.group(2)) / 1024, out.stdout + out.stderr, out.returncode


def main() -> None:
    import onnx
    from polygraphy.json import save_json

    from fpdiff.core import precision as prec
    from fpdiff.model import graph
    from fpdiff.onnxtools.export import ONNX_TYPE, cast_model, export_program
    from fpdiff.sources import load
    d = Path(tempfile.mkdtemp(prefix="fpdiff-vs-polygraphy-"))
    src = load(str(Path(__file__).parent / "specs" / "former_stack.py"))
    export_program(graph.export(src.module, src.inputs, prec.get("fp32"), graph.STATIC, None), d / "fp32.onnx")
    m32 = onnx.load(str(d / "fp32.onnx"))
    onnx.save(cast_model(m32, ONNX_TYPE["float16"]), str(d / "fp16.onnx"))
    name = [i.name for i in m32.graph.input][0]
    x = src.inputs[0].numpy()
    np.savez(d / "in.npz", **{name: x})
    save_json([{name: x}], str(d / "in32.json"))
    save_json([{name: x.astype(np.float16)}], str(d / "in16.json"))
    poly = str(BIN / "polygraphy")
    runs = {
        "polygraphy: fp32 mark all, save": [poly, "run", str(d / "fp32.onnx"), "--onnxrt", "--onnx-outputs", "mark",
                                            "all", "--load-inputs", str(d / "in32.json"), "--save-outputs",
                                            str(d / "ref.json")],
        "polygraphy: fp16 mark all, compare": [poly, "run", str(d / "fp16.onnx"), "--onnxrt", "--onnx-outputs",
                                               "mark", "all", "--load-inputs", str(d / "in16.json"),
                                               "--load-outputs", str(d / "ref.json")],
        "polygraphy: same, atol=rtol=1e-2": [poly, "run", str(d / "fp16.onnx"), "--onnxrt", "--onnx-outputs",
                                             "mark", "all", "--load-inputs", str(d / "in16.json"),
                                             "--load-outputs", str(d / "ref.json"), "--atol", "1e-2", "--rtol",
                                             "1e-2"],
        "fpdiff locate --mark-all": [str(BIN / "fpdiff"), "locate", str(d / "fp32.onnx"), "--backend", "ort",
                                     "--precision", "fp16", "--mark-all", "--inputs", str(d / "in.npz")],
        "fpdiff locate (bisection)": [str(BIN / "fpdiff"), "locate", str(d / "fp32.onnx"), "--backend", "ort",
                                      "--precision", "fp16", "--inputs", str(d / "in.npz"), "--no-repro"],
    }
    print(f"model bench/specs/former_stack.py, {len(m32.graph.node)} ONNX nodes, input {list(x.shape)}")
    for label, cmd in runs.items():
        wall, rss, text, rc = timed(cmd)
        if label.startswith("polygraphy") and ("compare" in label or "atol" in label):
            fails = len(re.findall(r"FAILED \| Output: ", text))
            passes = len(re.findall(r"PASSED \| Output: ", text))
            verdict = f"{fails} tensors failed, {passes} passed"
        elif label.startswith("fpdiff"):
            line = next((ln for ln in text.splitlines() if "mismatch" in ln or "agrees" in ln or "departs" in ln), "")
            verdict = line.strip()[:110]
        else:
            verdict = f"exit {rc}"
        print(f"{label:36s} {wall:7.1f} s  {rss:7.0f} MB  {verdict}")
    print(f"ref.json size: {(d / 'ref.json').stat().st_size / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
