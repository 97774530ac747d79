"""fpdiff plan at int8 on OpenVINO beside NNCF's own accuracy-aware quantization (nncf.quantize_with_accuracy_control),
side by side in one run, on the same fp32 ONNX graph, the same calibration inputs and the same bound.

NNCF's accuracy control needs a validation metric. The corpus models have no labelled data, so the metric is the
one fpdiff's plan meets: the relative L2 of the model's outputs against its float64 outputs on the judged inputs
(negated: higher is better), with max_drop the tolerance and drop_type ABSOLUTE. Both then stop at the same bound;
what differs is how each finds the layers (NNCF: its own ranking, then reverting layers to float one group at a time
with a validation each; fpdiff: quant's per-layer readings, then prefixes doubled, bisected and pruned, each trial a
whole quant cell on OpenVINO). NNCF's result is then judged by `fpdiff quant --artifact openvino=...` against
float64, on OpenVINO, as fpdiff's own plan is.

Counted: layers left float (NNCF: the QuantizeLinear pairs it removed, as its log says; fpdiff: the plan's nodes),
validations or evaluations, wall time, the bound reached (as judged by fpdiff on OpenVINO).

    python bench/quant_plan_nncf.py [--models gemma2,qwen2,t5] [--tolerance 0.05] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

SPECS = Path(__file__).parent / "specs" / "corpus"


def nncf_ac(spec: str, tolerance: float) -> dict:
    """NNCF's accuracy-aware int8 quantization of the model's fp32 ONNX graph, as fpdiff's OpenVINO cell hands NNCF
    the graph (weight transposes folded), calibrated on the same inputs; its result judged by fpdiff."""
    import onnx
    import onnxruntime as ort

    import fpdiff
    from fpdiff.onnxtools.nncf_graph import folded_transposes
    pure = fpdiff.quant(spec, schemes=["int8"], backends=["openvino"], layers=False)
    (cell,) = pure.cells
    fp32 = onnx.load(cell.info["float_graph"])
    model = folded_transposes(fp32)
    weights = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in weights]
    from fpdiff.analysis.options import RunOptions
    from fpdiff.analysis.quant import QuantOptions, QuantSession, _calibration
    from fpdiff.core import precision as prec
    from fpdiff.judging.grid import make_grid
    shared = RunOptions().ready()
    grid = make_grid(spec, shared.registry, shared.grid(backends=("openvino",), precisions=(prec.FP64,)))
    samples, _ = _calibration(grid.source, QuantOptions(), grid.seed)
    with QuantSession(grid, QuantOptions(schemes=("int8",), backends=("openvino",)), shared) as session:
        truth = session.truth
    feeds = {n: (x.float() if x.is_floating_point() else x).numpy() for n, x in zip(names, grid.source.inputs)}
    calls = {"n": 0}

    def rel(outs: list) -> float:
        got = np.concatenate([np.ravel(np.asarray(o, np.float64)) for o in outs])
        want = np.concatenate([np.ravel(np.asarray(t, np.float64)) for t in truth])
        return float(np.linalg.norm(got - want) / np.linalg.norm(want))

    def validate(m, data):
        calls["n"] += 1
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        errs = [rel(s.run(None, d)) for d in data]
        return -float(np.mean(errs)), [-e for e in errs]
    import nncf
    cal = nncf.Dataset([dict(zip(names, [t.numpy() for t in c])) for c in samples])
    val = nncf.Dataset([feeds])
    t0 = time.perf_counter()
    made = nncf.quantize_with_accuracy_control(model, cal, val, validate, max_drop=tolerance,
                                               drop_type=nncf.DropType.ABSOLUTE, subset_size=len(samples))
    seconds = time.perf_counter() - t0
    out = Path(cell.info["float_graph"]).with_name("nncf-ac.onnx")
    onnx.save(made, str(out))
    quantized = sum(n.op_type == "QuantizeLinear" for n in made.graph.node)
    again = fpdiff.quant(spec, schemes=[], backends=["openvino"], artifacts=[f"openvino={out}"], layers=False)
    (judged,) = again.cells
    pure_q = sum(n.op_type == "QuantizeLinear" for n in onnx.load(cell.info["quantized_graph"]).graph.node)
    return {"mode": "nncf-accuracy-control", "pure": (cell.metrics or {}).get("rel_l2"),
            "error": (judged.metrics or {}).get("rel_l2"), "status": str(judged.status),
            "quantizers_removed": pure_q - quantized, "quantizers_kept": quantized, "validations": calls["n"],
            "seconds": round(seconds, 1)}


def fpdiff_plan(spec: str, tolerance: float) -> dict:
    import fpdiff
    t0 = time.perf_counter()
    p = fpdiff.plan(spec, precision="int8", backend="openvino", tolerance=tolerance)
    return {"mode": "fpdiff-plan", "pure": p.pure_error, "error": p.error, "status": "pass" if p.passed else "no plan",
            "layers_float": round((1 - p.low_fraction) * p.units) if p.passed else None, "units": p.units,
            "nodes_float": len(p.keep), "evaluations": p.evaluations, "screened": p.screened,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="gemma2,qwen2,t5")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    rows = []
    for name in a.models.split(","):
        spec = name if name.endswith(".py") else str(SPECS / f"{name}.py")
        for run in (fpdiff_plan, nncf_ac):
            try:
                row = {"model": name, **run(spec, a.tolerance)}
            except Exception as e:  # one model's failure is its row
                row = {"model": name, "mode": run.__name__, "failed": f"{type(e).__name__}: {str(e)[:300]}"}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps({"tolerance": a.tolerance, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
