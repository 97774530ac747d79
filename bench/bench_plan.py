"""fpdiff plan vs onnxconverter-common's auto_convert_mixed_precision on the same ONNX model, inputs and
tolerance, side by side in one process: end-to-end evaluations, wall time, nodes left computing in fp32, final
error; then the speed of each planned model against fp32 and pure fp16 on ONNX Runtime's CPU provider.

Both tools judge a candidate the same way: relative L2 of the outputs against the float64 reference evaluator
<= tolerance (passed to onnxconverter-common as its validate_fn, with rtol/atol off). Its attempts are counted
by wrapping that function; its own first call (fp32 against itself) is not counted.

Run: .venv/bin/python bench/bench_plan.py [SPEC.py ...]
(needs `pip install onnxconverter-common==1.16.0`: `make bench` does)
"""
from __future__ import annotations

import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
CASES = [("padded_encoder.py", 1e-2), ("hazard_stack.py", 1e-2), ("former_stack.py", 1e-4)]


def ort_ms(model, feeds: dict, reps: int = 20) -> float:
    import onnxruntime as ort
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sess.run(None, feeds)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def run_case(spec: str, tol: float, d: Path) -> dict:
    import onnx
    import torch
    from onnx import TensorProto
    from onnxconverter_common.auto_mixed_precision import auto_convert_mixed_precision

    import fpdiff
    from fpdiff.analysis.plan.jobs import onnx_compute_types
    from fpdiff.analysis.plan.onnx_models import float64_run
    from fpdiff.analysis.plan.search import rel_l2
    from fpdiff.onnxtools.export import export_program
    from fpdiff.onnxtools.mixed import named, to_mixed
    from fpdiff.sources import load
    src = load(str(HERE / "specs" / spec))
    path = d / spec.replace(".py", ".onnx")
    export_program(torch.export.export(src.module, src.inputs, strict=False), path)
    model = named(onnx.load(str(path)))
    onnx.save(model, str(path))
    names = [i.name for i in model.graph.input]
    feeds = {n: t.numpy() for n, t in zip(names, src.inputs)}
    np.savez(d / "inputs.npz", **feeds)
    values = float64_run(model, feeds)
    expected = [np.asarray(values[o.name], dtype=np.float64) for o in model.graph.output]
    row = {"model": spec, "nodes": len(model.graph.node), "tolerance": tol}

    t = time.perf_counter()
    planned = d / spec.replace(".py", ".plan.onnx")  # the planned graph as its trial ran it, written by --export-onnx
    plan = fpdiff.plan(str(path), precision="fp16", backend="ort", tolerance=tol, inputs=str(d / "inputs.npz"),
                       measure_speed=False, export_onnx=str(planned))
    ours = onnx.load(str(planned)) if plan.passed else None
    row["fpdiff"] = {"evaluations": plan.evaluations, "analyses": len(plan.analyses),
                     "seconds": time.perf_counter() - t, "passed": plan.passed, "kept": len(plan.keep),
                     "error": plan.error, "pure_error": plan.pure_error,
                     **(onnx_compute_types(ours) if ours is not None else {})}

    calls = {"n": -1}  # its first validate call is fp32 against itself

    def validate(_res0, res1):
        calls["n"] += 1
        return rel_l2(expected, [np.asarray(r, dtype=np.float64) for r in res1]) <= tol
    t = time.perf_counter()
    theirs, err = None, None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            theirs = auto_convert_mixed_precision(model, feeds, validate_fn=validate, keep_io_types=True)
    except Exception as e:  # it raises when its final model fails validation
        err = f"{type(e).__name__}: {e}"
    row["onnxconverter_common"] = {"evaluations": calls["n"], "seconds": time.perf_counter() - t,
                                   "passed": theirs is not None, "failure": err}
    if theirs is not None:
        import onnxruntime as ort
        out = ort.InferenceSession(theirs.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        row["onnxconverter_common"].update(error=rel_l2(expected, [np.asarray(o, np.float64) for o in out]),
                                           **onnx_compute_types(theirs))
    speed = {"fp32": ort_ms(model, feeds), "fp16": ort_ms(to_mixed(model, TensorProto.FLOAT16, ()), feeds)}
    if ours is not None:
        speed["fpdiff plan"] = ort_ms(ours, feeds)
    if theirs is not None:
        speed["onnxconverter-common"] = ort_ms(theirs, feeds)
    row["ort_cpu_ms"] = speed
    tp = fpdiff.plan(str(HERE / "specs" / spec), precision="fp16", tolerance=tol)
    row["torch_plan"] = {"kept": len(tp.keep), "units": tp.units, "evaluations": tp.evaluations,
                         "error": tp.error, "passed": tp.passed, "speed": tp.as_dict()["speed"]}
    return row


def main() -> None:
    import json
    d = Path(tempfile.mkdtemp(prefix="fpdiff-bench-plan-"))
    rows = []
    only = sys.argv[1:]  # optional: spec file names to run
    for spec, tol in CASES:
        if only and spec not in only:
            continue
        row = run_case(spec, tol, d)
        rows.append(row)
        f, o = row["fpdiff"], row["onnxconverter_common"]
        print(f"\n{spec}: {row['nodes']} ONNX nodes, tolerance {tol:g} (rel L2 vs float64), ORT CPU fp16")
        print(f"  fpdiff plan           : {f['evaluations']:4d} evaluations (+{f['analyses']} analysis pass), "
              f"{f['seconds']:6.1f} s, kept {f['kept']} ops, fp32 nodes {f.get('fp32_nodes')}, "
              f"error {f['error']:.3g}, passed {f['passed']} (pure fp16 {f['pure_error']:.3g})")
        tail = (f"fp32 nodes {o.get('fp32_nodes')}, error {o.get('error', float('nan')):.3g}" if o["passed"]
                else f"FAILED: {o['failure']}")
        print(f"  onnxconverter-common  : {o['evaluations']:4d} evaluations, {o['seconds']:6.1f} s, {tail}")
        if o["evaluations"] > 0:
            print(f"  evaluations ratio fpdiff/occ: {f['evaluations'] / o['evaluations']:.2f}")
        print("  ORT CPU median ms     : " + ", ".join(f"{k} {v:.3f}" for k, v in row["ort_cpu_ms"].items()))
        t = row["torch_plan"]
        sp = t["speed"]
        print(f"  torch source, eager   : kept {t['kept']}/{t['units']} in {t['evaluations']} evaluations, error "
              f"{t['error']:.3g}" + (", ms " + ", ".join(f"{k} {v:.2f}" for k, v in sp["ms"].items()) if sp else ""))
    print(json.dumps(rows, indent=1, default=str), file=sys.stderr)


if __name__ == "__main__":
    main()
