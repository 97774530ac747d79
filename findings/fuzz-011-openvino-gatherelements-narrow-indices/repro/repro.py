"""Repro written by fpdiff ops: [openvino] gather at fp32 (dynamic), dynamic shapes: fails
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

outs, err = run()
print(f"fpdiff recorded: {meta.get('observed_error') or '(no message)'}")
if err is not None:
    print(f"{who} raised: {last_line(err)}")
    sys.exit(1)
print(f"{who} ran without raising")
sys.exit(0)
