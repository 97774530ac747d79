"""Repro written by fpdiff ops: [openvino] rms_norm>erf at int8 (tiny): wrong result
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
    import openvino as ov
    model = ov.Core().read_model(str(here / "segment.xml"))
    hint = meta["inference_precision_hint"]
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": hint})
    print("OpenVINO ran at", compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())
    def feed(x, dtype, port):
        if dtype == "bfloat16":  # numpy has no bfloat16: the same bits as OpenVINO's bf16
            b = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
            return ov.Tensor(b, list(x.shape), ov.Type.bf16)
        return x.astype(dtype) if x.dtype.kind == "f" else x
    request = compiled.create_infer_request()
    request.infer([feed(x, d, p) for x, d, p in zip(xs, meta["input_dtypes"], compiled.inputs)])
    def host(t):  # a bf16 output arrives as float16-typed bits: widen the bits themselves
        a = np.asarray(t.data)
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32) if t.element_type == ov.Type.bf16 else a
    outs = [host(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]
    return outs

# --- end of the backend's part ---

def run():
    """(outputs, None) or (None, the exception the backend raised); the backend not installed is this script's."""
    try:
        return backend_outputs(), None
    except ModuleNotFoundError as e:
        broken(f"{e}: install the backend ({meta['versions_line']})")
    except Exception as e:
        return None, e

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
for i in np.flatnonzero(differs)[:5]:
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
