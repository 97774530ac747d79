"""A standalone repro bundle for one segment: artifact, inputs, float64 expected, outputs, and one script that
shows the difference with nothing but the backend (and numpy) installed."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from fpdiff.backends.base import Repro
from fpdiff.core.errors import UsageError
from fpdiff.core.precision import Precision

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


def write(out: Path, *, title: str, backend, precision: Precision, device: str, program, inputs: list,
          expected: list[np.ndarray], backend_out: list[np.ndarray] | None, baseline_rel_l2: float, limit: float,
          flags: tuple[str, ...], versions: dict) -> Path:
    """Write the bundle: segment, inputs, float64 expected and (when given) the backend's outputs; the backend
    adds what it needs to run the segment alone (Backend.repro). Returns the script's path."""
    onnx_segment = not isinstance(program, torch.export.ExportedProgram)  # an ONNX model's segment
    out.mkdir(parents=True, exist_ok=True)
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
    meta = {"backend": backend.name, "precision": precision.name, "device": device, "flags": list(flags),
            "input_dtypes": [str(t.dtype).removeprefix("torch.") for t in inputs], "baseline_rel_l2": baseline_rel_l2,
            "limit": limit, "versions": versions}
    body = backend.repro(Repro(out, program, onnx_segment, precision.name, device, tuple(flags), meta))
    if body is None:
        raise UsageError(f"{backend.name} writes no repro bundle for this model ({'ONNX' if onnx_segment else 'torch'}"
                         " segments); rerun with --no-repro")
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    script = out / "repro.py"
    script.write_text(_HEAD.format(title=title) + body + _TAIL)
    return script
