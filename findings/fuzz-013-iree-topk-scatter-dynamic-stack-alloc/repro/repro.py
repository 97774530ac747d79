"""Repro written by fpdiff ops: [iree] topk_values>scatter_add at fp32 (dynamic), dynamic shapes: fails
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
    import os
    import subprocess
    from iree.compiler.tools.binaries import find_tool
    done = subprocess.run([find_tool("iree-compile"), str(here / "segment.mlir"), *meta["compile_args"], "-o",
                           os.devnull], capture_output=True, text=True)
    if done.returncode < 0:  # the compiler died by a signal: this run dies by the same one
        os.kill(os.getpid(), -done.returncode)
    if done.returncode:
        said = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in said if "error" in ln.lower()] or said[:1]
        raise RuntimeError(f"iree-compile exited {done.returncode}: {errors[0] if errors else ''}")
    outs = []
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
