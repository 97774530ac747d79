"""A standalone repro bundle for one segment: artifact, inputs, float64 expected, outputs, and one script that
shows the difference with nothing but the backend (and numpy) installed."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import torch

from .precision import Precision

_HEAD = '''"""Repro written by fpdiff locate: {title}
Run: python repro.py   (exit 1: the difference reproduced; 0: it did not)"""
import json
import pathlib
import sys

import numpy as np

here = pathlib.Path(__file__).parent
meta = json.loads((here / "meta.json").read_text())
data = np.load(here / "inputs.npz")
xs = [data[f"in{{i}}"] for i in range(len(data.files))]
expected = np.load(here / "expected.npz")
expected = [expected[f"out{{i}}"] for i in range(len(expected.files))]
'''

_TORCH_IN = '''import torch
def as_torch(x, dtype):
    t = torch.from_numpy(x)
    return t.to(getattr(torch, dtype)) if t.is_floating_point() else t
xt = [as_torch(x, d) for x, d in zip(xs, meta["input_dtypes"])]
program = torch.export.load(str(here / "segment.pt2"))
'''

_RUN = {
    "torch": _TORCH_IN + '''with torch.no_grad():
    outs = program.module()(*xt)
''',
    "inductor": _TORCH_IN + '''with torch.no_grad():
    outs = torch.compile(program.module())(*xt)
''',
    "plugin": _TORCH_IN + '''import importlib.util
spec = importlib.util.spec_from_file_location("plugin", meta["plugin_file"])
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)
backend = next(c for c in vars(plugin).values() if getattr(c, "name", None) == meta["backend"])()
with torch.no_grad():
    outs = backend.prepare(program, meta["precision"], meta["device"])(*xt)
''',
    "ort": '''import onnxruntime as ort
def as_np(x, dtype):
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dtype) if x.dtype.kind == "f" else x
session = ort.InferenceSession(str(here / "segment.onnx"), providers=["CPUExecutionProvider"])
names = [i.name for i in session.get_inputs()]
outs = session.run(None, {n: as_np(x, d) for n, x, d in zip(names, xs, meta["input_dtypes"])})
''',
    "iree": '''import iree.runtime as rt
def as_np(x, dtype):
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dtype) if x.dtype.kind == "f" else x
module = rt.load_vm_flatbuffer_file(str(here / "segment.vmfb"), driver=meta["driver"])
fn = [n for n in module.vm_module.function_names if not n.startswith("__") and not n.endswith("$async")][0]
outs = module[fn](*[as_np(x, d) for x, d in zip(xs, meta["input_dtypes"])])
outs = [o.to_host() for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
''',
}

_TAIL = '''
def host(o):
    o = o.detach().cpu() if hasattr(o, "detach") else o
    o = o.float() if hasattr(o, "float") and str(getattr(o, "dtype", "")) == "torch.bfloat16" else o
    return np.asarray(o, dtype=np.float64)
outs = [host(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
o = np.concatenate([a.ravel() for a in outs])
e = np.concatenate([a.ravel() for a in expected])
bad = int((~np.isfinite(o) & np.isfinite(e)).sum())
rel = float("inf") if bad else float(np.linalg.norm(o - e) / np.linalg.norm(e))
print(f"{meta['backend']} at {meta['precision']}: relative L2 vs float64 = {rel:.3e} ({bad} non-finite); "
      f"torch eager at the same precision: {meta['baseline_rel_l2']:.3e}; limit {meta['limit']:.3e}")
sys.exit(1 if rel > meta["limit"] else 0)
'''


def _np(t: torch.Tensor) -> np.ndarray:
    return (t.float() if t.dtype == torch.bfloat16 else t).detach().cpu().numpy()


def write(out: Path, *, title: str, backend: str, kind: str, precision: Precision, device: str,
          program, inputs: list, expected: list[np.ndarray],
          backend_out: list[np.ndarray] | None, baseline_rel_l2: float, limit: float, flags: list[str],
          plugin_file: str | None, versions: dict) -> Path:
    """Write the bundle for `kind` (torch, inductor, ort, iree or plugin) and return the script's path."""
    out.mkdir(parents=True, exist_ok=True)
    onnx_segment = not isinstance(program, torch.export.ExportedProgram)  # an ONNX model's segment
    if onnx_segment:
        import onnx
        onnx.save(program, str(out / "segment.onnx"))
        inputs = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    else:
        torch.export.save(program, str(out / "segment.pt2"))
    np.savez(out / "inputs.npz", **{f"in{i}": _np(t) for i, t in enumerate(inputs)})
    np.savez(out / "expected.npz", **{f"out{i}": a for i, a in enumerate(expected)})
    if backend_out is not None:
        np.savez(out / "backend_output.npz", **{f"out{i}": a for i, a in enumerate(backend_out)})
    meta = {"backend": backend, "precision": precision.name, "device": device, "flags": flags,
            "input_dtypes": [str(t.dtype).removeprefix("torch.") for t in inputs], "baseline_rel_l2": baseline_rel_l2,
            "limit": limit, "versions": versions, "plugin_file": plugin_file,
            "driver": "cuda" if device.startswith("cuda") else "local-task"}
    if kind == "ort" and not onnx_segment:
        from .export import export_program
        export_program(program, out / "segment.onnx")
    elif kind == "iree":
        from .backends.iree import _tool, import_program
        if onnx_segment:
            subprocess.run([_tool("iree-import-onnx"), str(out / "segment.onnx"), "-o", str(out / "segment.mlir")],
                           check=True, capture_output=True)
            input_type = []
        else:
            import_program(program, precision.name, out / "segment.mlir")
            input_type = ["--iree-input-type=torch"]
        cmd = [_tool("iree-compile"), str(out / "segment.mlir"), *input_type, *flags,
               "-o", str(out / "segment.vmfb")]
        subprocess.run(cmd, check=True, capture_output=True)
        meta["compile_command"] = " ".join(["iree-compile", "segment.mlir", *cmd[2:-2], "-o", "segment.vmfb"])
    elif kind == "plugin" and plugin_file:
        shutil.copy(plugin_file, out / Path(plugin_file).name)
        meta["plugin_file"] = Path(plugin_file).name
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    script = out / "repro.py"
    body = _RUN[kind]
    if kind == "plugin":
        body = body.replace('meta["plugin_file"]', 'str(here / meta["plugin_file"])')
    script.write_text(_HEAD.format(title=title) + body + _TAIL)
    return script
