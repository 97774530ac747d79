"""A standalone repro bundle: the artifact a backend ran (an exported program or an ONNX graph, or what the backend
compiled from it), its exact inputs, the float64 expectation, and one script that shows the failure with nothing but
the backend (and numpy) installed. Shared by locate (a segment) and ops (one op).

The script's exit status is its answer, so a re-run can be counted without reading it:
  0  the failure did not reproduce
  1  it reproduced (by the bundle's rule, below)
  2  the backend raised where the rule expects outputs: another failure than the one recorded
  3  the script itself could not run (a file missing, the backend not installed): nothing was reproduced

Rules: "rel-l2" (relative L2 vs float64 above the limit), "max-norm" (the worst element's error over the largest
|expected| above the limit: an error confined to few elements, as check's verdict rule names it), "flips"
(integer-valued outputs: more elements differing from the float64 expectation than the limit), "raises" (the backend
raises), "crash" (the backend's process dies: the script runs it in a child process, so a signal or an exit mid-run
is the answer, not the script's death), "steps" (a quantized graph's outputs: the worst element's distance from the
expectation, the graph's exact emulation, in quantization steps of its output, meta.json's `step`)."""
from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fpdiff.backends.base import Repro
from fpdiff.core import precision as prec
from fpdiff.core.errors import NoRepro
from fpdiff.sources.program import op_modules

REL_L2, MAX_NORM, FLIPS, RAISES, CRASH, STEPS = "rel-l2", "max-norm", "flips", "raises", "crash", "steps"
RULES = (REL_L2, MAX_NORM, FLIPS, RAISES, CRASH, STEPS)
NOT_REPRODUCED, REPRODUCED, RAISED_INSTEAD, BROKEN = 0, 1, 2, 3
SHOWN = 5  # differing elements printed: enough to see a pattern (a sign, an offset), short enough for a report

_HEAD = '''"""Repro written by fpdiff @TOOL@: @TITLE@
Run: python repro.py
Exit 1: the failure reproduced; 0: it did not; 2: the backend raised instead of returning outputs;
3: this script could not run (nothing was reproduced)."""
import json
import os
import pathlib
import subprocess
import sys


def broken(why):
    print(f"REPRO BROKEN (not a reproduction): {why}")
    sys.exit(3)


def uncaught(kind, value, tb):  # an exception this script did not expect is its own failure, never an answer
    import traceback
    traceback.print_exception(kind, value, tb)
    print(f"REPRO BROKEN (not a reproduction): {kind.__name__}: {value}")
    sys.stdout.flush()
    os._exit(3)


sys.excepthook = uncaught


try:
    import numpy as np
    here = pathlib.Path(__file__).resolve().parent
    meta = json.loads((here / "meta.json").read_text())
    missing = [f for f in meta["files"] if not (here / f).exists()]
    if missing:
        broken(f"missing beside this script: {', '.join(missing)}")
    data = np.load(here / "inputs.npz")
    xs = [data[f"in{i}"] for i in range(len(data.files))]
    expected = np.load(here / "expected.npz")
    expected = [expected[f"out{i}"] for i in range(len(expected.files))]
    import importlib
    for name in meta.get("requires", []):  # registers the program's custom ops: torch.export.load needs them
        importlib.import_module(name)
except Exception as e:  # anything before the backend runs is this script's own failure
    broken(f"{type(e).__name__}: {e}")
who = f"{meta['backend']} at {meta['precision']}"


def last_line(e):
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[-1].strip() if lines else ''}"


# --- the backend's part ---
def backend_outputs():
    """The backend's own API, nothing else: sets outs from xs."""
'''

_RUN = '''
# --- end of the backend's part ---

def run():
    """(outputs, None) or (None, the exception the backend raised); the backend not installed is this script's."""
    try:
        return backend_outputs(), None
    except ModuleNotFoundError as e:
        broken(f"{e}: install the backend ({meta['versions_line']})")
    except Exception as e:
        return None, e
'''

_RAISES = '''
outs, err = run()
print(f"fpdiff recorded: {meta.get('observed_error') or '(no message)'}")
if err is not None:
    print(f"{who} raised: {last_line(err)}")
    sys.exit(1)
print(f"{who} ran without raising")
sys.exit(0)
'''

_CRASH = '''
if os.environ.get("FPDIFF_REPRO_CHILD") == "1":
    outs, err = run()
    print(f"repro-child: {'raised ' + last_line(err) if err is not None else 'done'}", flush=True)
    sys.exit(0)
print(f"fpdiff recorded: {meta.get('observed_error') or '(no message)'}")
child = subprocess.run([sys.executable, __file__], env={**os.environ, "FPDIFF_REPRO_CHILD": "1"},
                       capture_output=True, text=True)
sys.stderr.write(child.stderr)
said = child.stdout
if "REPRO BROKEN" in said:
    print(said.strip())
    sys.exit(3)
if "repro-child: done" in said:
    print(f"{who} ran to the end: no crash")
    sys.exit(0)
if "repro-child: raised" in said:
    print(f"{who} raised instead of dying: {said.split('repro-child: raised', 1)[1].strip()}")
    sys.exit(2)
if child.returncode < 0:
    import signal
    print(f"{who}: the process died by signal {signal.Signals(-child.returncode).name}")
else:
    print(f"{who}: the process exited with status {child.returncode} in the middle of the run")
sys.exit(1)
'''

_COMPARE = '''
np.seterr(all="ignore")  # inf - inf and the like are counted below, not warned about
outs, err = run()
if err is not None:
    import traceback
    traceback.print_exception(err)
    print(f"{who} raised instead of returning outputs: {last_line(err)}")
    sys.exit(2)


def flat(o):
    if isinstance(o, dict):
        o = list(o.values())
    if isinstance(o, (list, tuple)):
        return [a for x in o for a in flat(x)]
    o = o.detach().cpu() if hasattr(o, "detach") else o
    o = o.float() if hasattr(o, "float") and str(getattr(o, "dtype", "")) == "torch.bfloat16" else o
    return [np.asarray(o, dtype=np.float64)]


outs = flat(outs)
shapes, want = [a.shape for a in outs], [a.shape for a in expected]
if shapes != want:
    print(f"{who}: output shapes {shapes}, the float64 expectation's {want}")
    sys.exit(1)
o = np.concatenate([a.ravel() for a in outs]) if outs else np.zeros(0)
e = np.concatenate([a.ravel() for a in expected]) if expected else np.zeros(0)
differs = (o != e) & ~(np.isnan(o) & np.isnan(e))
bad = int((~np.isfinite(o) & np.isfinite(e)).sum())
norm = float(np.linalg.norm(e))
delta = float(np.linalg.norm(np.where(differs, o - e, 0.0))) if not bad else float("inf")
rel = float("inf") if bad else (delta / norm if norm else (0.0 if not differs.any() else float("inf")))
err_abs = np.abs(np.where(differs, o - e, 0.0))
max_abs = float(np.nanmax(err_abs)) if err_abs.size else 0.0
max_ref = float(np.nanmax(np.abs(np.where(np.isfinite(e), e, 0.0)))) if e.size else 0.0
worst = float("inf") if bad else (max_abs / max_ref if max_ref else (0.0 if not max_abs else float("inf")))
flips = int(differs.sum())
print(f"{who}: relative L2 vs float64 = {rel:.3e} ({bad} non-finite); max abs error {max_abs:.3e}; "
      f"worst element {worst:.3e} of max |expected|; {flips} of {o.size} elements differ")
for i in np.flatnonzero(differs)[:@SHOWN@]:
    print(f"  element {i}: observed {float(o[i])!r}, expected {float(e[i])!r}")
if "backend_output.npz" in meta["files"]:  # the cell's own outputs: this run computed the same bits, or not
    with np.load(here / "backend_output.npz") as cell_out:
        was = [np.asarray(cell_out[f"out{i}"], dtype=np.float64) for i in range(len(cell_out.files))]
    same = [a.shape for a in was] == shapes and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(was, outs))
    print("the same outputs as the cell's, bit for bit" if same else "outputs differ from the cell's own run")
base = meta.get("baseline") or {}
if base:
    print(f"{meta['baseline_label']} at the same precision: " + ", ".join(f"{k} {v:.3e}" if isinstance(v, float)
                                                                       else f"{k} {v}" for k, v in base.items()))
value = {"flips": flips, "max-norm": worst, "steps": max_abs / meta.get("step", 1.0)}.get(meta["rule"], rel)
print(f"rule {meta['rule']}: {value:.6g} against limit {meta['limit']:.3e}")
sys.exit(1 if value > meta["limit"] else 0)
'''

_TAILS = {REL_L2: _COMPARE, MAX_NORM: _COMPARE, FLIPS: _COMPARE, RAISES: _RAISES, CRASH: _CRASH, STEPS: _COMPARE}


def as_numpy(t: Any) -> np.ndarray:
    """An input as numpy (bfloat16 widened to float32: numpy has none; the script narrows it back by meta)."""
    if isinstance(t, torch.Tensor):
        return (t.float() if t.dtype == torch.bfloat16 else t).detach().cpu().numpy()
    a = np.asarray(t)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a  # ml_dtypes' bfloat16: npz cannot hold it


def dtype_of(t: Any) -> str:
    return str(t.dtype).removeprefix("torch.")


@dataclass(frozen=True)
class Bundle:
    """What one repro bundle holds: the artifact and inputs the backend ran, the float64 expected outputs and (when
    given) the backend's own, the rule its script applies with its limit and baseline, and where it runs.
    `input_dtypes`: what the backend was fed, where it is not the inputs' own dtype."""
    title: str
    tool: str
    backend: Any
    precision: prec.Precision
    device: str
    program: Any
    inputs: list
    expected: list[np.ndarray]
    observed: list[np.ndarray] | None
    rule: str
    limit: float
    baseline: dict | None
    baseline_label: str
    flags: tuple[str, ...]
    versions: dict
    input_dtypes: list[str] | None = None
    extra: dict | None = None
    refusal_hint: str = ""


def write(out: Path, b: Bundle) -> Path:
    """Write the bundle: the artifact, inputs, float64 expected and (when given) the backend's outputs; the backend
    adds what it needs to run the artifact alone (Backend.repro). Returns the script's path."""
    if b.rule not in RULES:
        raise ValueError(f"unknown repro rule {b.rule!r}; known: {', '.join(RULES)}")  # a caller's bug
    onnx_artifact = not isinstance(b.program, torch.export.ExportedProgram)
    out.mkdir(parents=True, exist_ok=True)
    if onnx_artifact:
        import onnx
        onnx.save(b.program, str(out / "segment.onnx"))
    else:
        torch.export.save(b.program, str(out / "segment.pt2"))
    np.savez(out / "inputs.npz", **{f"in{i}": as_numpy(t) for i, t in enumerate(b.inputs)})
    np.savez(out / "expected.npz", **{f"out{i}": np.asarray(a, dtype=np.float64) for i, a in enumerate(b.expected)})
    if b.observed is not None:
        np.savez(out / "backend_output.npz", **{f"out{i}": as_numpy(a) for i, a in enumerate(b.observed)})
    meta = {"backend": b.backend.name, "precision": b.precision.name, "device": b.device, "flags": list(b.flags),
            "input_dtypes": b.input_dtypes or [dtype_of(t) for t in b.inputs], "rule": b.rule, "limit": b.limit,
            "baseline": b.baseline or {}, "baseline_label": b.baseline_label, "versions": b.versions,
            "versions_line": ", ".join(f"{k} {v}" for k, v in b.versions.items() if v), **(b.extra or {})}
    if not onnx_artifact:
        meta["requires"] = [m for m in op_modules(b.program) if not m.endswith(".py")]  # a spec's own ops
    repro = Repro(out, b.program, onnx_artifact, b.precision, b.device, tuple(b.flags), meta)
    body = b.backend.repro(repro)
    if body is None:
        what = "ONNX" if onnx_artifact else "torch"
        raise NoRepro(f"{b.backend.name} writes no repro bundle for this model ({what} artifacts){b.refusal_hint}")
    meta["files"] = sorted(p.name for p in out.iterdir() if p.is_file() and p.name not in ("meta.json", "repro.py",
                                                                                            "REPORT.md"))
    (out / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
    script = out / "repro.py"
    head = _HEAD.replace("@TOOL@", b.tool).replace("@TITLE@", b.title.replace('"""', "'''"))
    tail = _TAILS[b.rule].replace("@SHOWN@", str(SHOWN))
    script.write_text(head + textwrap.indent(body, "    ") + "    return outs\n" + _RUN + tail)
    return script
