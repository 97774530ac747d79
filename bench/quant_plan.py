"""fpdiff plan at a quantized format, beside leaving layers float in the order users pick them by hand, side by side
in one run: for int8 on ONNX Runtime, its own quantization debugger's order (qdq_loss_debug: SQNR of each activation,
float model against the QDQ model, worst first); for weight formats (int4-weight, int8-dynamic) on any backend whose
quantizer fpdiff drives, the order of each weight's own rounding error (relative L2 of the rounded weight against
the float one, worst first), which needs no run of the model.

Every row's trials are real (ONNX Runtime's quantizer with nodes_to_exclude, its runtime, the cell judged against
float64 on inputs calibration never saw, as `fpdiff quant` judges one); the same layers (an activation and the nodes
around it) in every mode. Modes:
- fpdiff: `fpdiff plan MODEL --precision int8 --backend ort` (its ranking: quant's per-layer readings; its search:
  prefixes doubled, bisected, then pruned);
- sqnr-search: the same search over the layers ranked by ORT's SQNR instead (the ranking alone compared);
- sqnr-one-by-one: layers left float one more at a time in ORT's SQNR order until the model passes (the hand
  workflow), at most --cap evaluations;
- weight-search, weight-one-by-one: the same two over the weights ranked by their own rounding error.

    python bench/quant_plan.py [--models gemma2,qwen2,t5,mobilenet_v2,minilm] [--tolerance 0.05] [--json OUT]
    python bench/quant_plan.py --precision int4-weight --backend ort --backup int8 \
        --modes fpdiff,weight-search,weight-one-by-one
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import fpdiff.analysis.plan.quantized as planned
from fpdiff.analysis.plan.search import Trial

SPECS = Path(__file__).parent / "specs" / "corpus"


def ort_sqnr(float_graph: str, quantized_graph: str, feeds: dict[str, np.ndarray]) -> dict[str, float]:
    """ONNX Runtime's qdq_loss_debug on the judged inputs: SQNR (dB) of each activation, QDQ against float."""
    import tempfile

    from onnxruntime.quantization import CalibrationDataReader
    from onnxruntime.quantization import qdq_loss_debug as dbg

    class One(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter([feeds])

        def get_next(self):
            return next(self.it, None)
    with tempfile.TemporaryDirectory() as tmp:
        fa, qa = f"{tmp}/f.onnx", f"{tmp}/q.onnx"
        dbg.modify_model_output_intermediate_tensors(float_graph, fa)
        dbg.modify_model_output_intermediate_tensors(quantized_graph, qa)
        fl, qd = dbg.collect_activations(fa, One()), dbg.collect_activations(qa, One())
    err = dbg.compute_activation_error(dbg.create_activation_matching(qd, fl))
    return {k: float(v["qdq_err"]) for k, v in err.items() if "qdq_err" in v}


def with_sqnr_ranking(feeds_of) -> None:
    """plan's layers ranked by ORT's SQNR of their activation instead (worst first; unmatched last)."""
    ours = planned.ranked_layers

    def ranked(cell):
        layers = ours(cell)
        sqnr = ort_sqnr(cell.info["float_graph"], cell.info["quantized_graph"], feeds_of(cell))
        return sorted(layers, key=lambda x: sqnr.get(x.tensor, float("inf")))
    planned.ranked_layers = ranked


def weight_error(cell) -> dict[str, float]:
    """Each quantized weight's own rounding error: relative L2 of its dequantized values against the float ones."""
    import onnx
    from onnx import numpy_helper

    from fpdiff.onnxtools.weights import folded, quantized_weights
    float_graph = onnx.load(cell.info["float_graph"])
    floats = {t.name: numpy_helper.to_array(t) for t in folded(float_graph).graph.initializer}
    out = {}
    for w in quantized_weights(onnx.load(cell.info["quantized_graph"]), float_graph):
        exact = floats[w.weight].astype(np.float64)
        out[w.weight] = float(np.linalg.norm(w.values - exact) / (np.linalg.norm(exact) or 1.0))
    return out


def with_weight_ranking() -> None:
    """plan's weight layers ranked by each weight's own rounding error instead (worst first)."""
    ours = planned.ranked_weights

    def ranked(cell, session):
        err = weight_error(cell)
        return sorted(ours(cell, session), key=lambda x: -err.get(x.tensor, 0.0))
    planned.ranked_weights = ranked


def one_by_one(cap: int):
    """The search replaced by the hand workflow: one more layer float each evaluation, in rank order."""
    def search(layers, evaluate, whole: bool = False):
        t: Trial | None = None
        for k in range(1, min(len(layers), cap) + 1):
            t = evaluate(layers[:k])
            if t.passed:
                return list(layers[:k]), t
        return None
    return search


def run(spec: str, tolerance: float, precision: str = "int8", backend: str = "ort", backup: str = "float") -> dict:
    import fpdiff
    t0 = time.perf_counter()
    # no compile cache: every mode quantizes, exports and compiles what it tries itself (modes share keep-sets)
    p = fpdiff.plan(spec, precision=precision, backend=backend, tolerance=tolerance, backup=backup, cache_dir=False)
    return {"passed": p.passed, "pure": p.pure_error, "error": p.error, "layers": p.units,
            "kept_layers": round((1 - p.low_fraction) * p.units) if p.passed else None, "nodes": len(p.keep),
            "evaluations": p.evaluations, "seconds": round(time.perf_counter() - t0, 1), "message": p.message[:200]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="gemma2,qwen2,t5,mobilenet_v2,minilm")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--cap", type=int, default=40)
    ap.add_argument("--modes", default="fpdiff,sqnr-search,sqnr-one-by-one")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--backend", default="ort")
    ap.add_argument("--backup", default="float")
    ap.add_argument("--backend-python", action="append", default=[], metavar="NAME=PYTHON")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.backend_python:
        from fpdiff.backends import routes
        routes.configure(python=dict(x.split("=", 1) for x in a.backend_python))
    from fpdiff.sources import load
    rows = []
    ours_search = planned.search
    ours_ranked, ours_weights = planned.ranked_layers, planned.ranked_weights
    for name in a.models.split(","):
        spec = name if name.endswith(".py") else str(SPECS / f"{name}.py")
        src = load(spec)
        feeds = {n: np.asarray(x.float() if x.is_floating_point() else x) for n, x in
                 zip(src.input_names, src.inputs)}
        for mode in a.modes.split(","):
            planned.search, planned.ranked_layers, planned.ranked_weights = ours_search, ours_ranked, ours_weights
            if mode.startswith("sqnr"):
                with_sqnr_ranking(lambda cell, given=feeds: given)
            if mode.startswith("weight"):
                with_weight_ranking()
            if mode.endswith("one-by-one"):
                planned.search = one_by_one(a.cap)
            try:
                row = {"model": name, "mode": mode, **run(spec, a.tolerance, a.precision, a.backend, a.backup)}
            except Exception as e:  # one model's failure is its row
                row = {"model": name, "mode": mode, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            rows.append(row)
            print(json.dumps(row), flush=True)
    planned.search, planned.ranked_layers, planned.ranked_weights = ours_search, ours_ranked, ours_weights
    if a.json:
        Path(a.json).write_text(json.dumps({"tolerance": a.tolerance, "precision": a.precision, "backend": a.backend,
                                            "backup": a.backup, "rows": rows}, indent=1))
    print("| model | mode | pure | plan error | layers left float / quantized | nodes | evaluations | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r and "pure" not in r:
            print(f"| {r['model']} | {r['mode']} | error: {r['error']} | | | | | |")
            continue
        kept = f"{r['kept_layers']} / {r['layers']}" if r["passed"] else f"no plan / {r['layers']}"
        err = f"{r['error']:.3g}" if r["passed"] and r["error"] is not None else "-"
        print(f"| {r['model']} | {r['mode']} | {r['pure']:.3g} | {err} | {kept} | {r['nodes']} | "
              f"{r['evaluations']} | {r['seconds']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
