"""fpdiff plan at a quantized format on ONNX Runtime, beside leaving layers float in the order of ONNX Runtime's own
quantization debugger (qdq_loss_debug: SQNR of each activation, float model against the QDQ model, worst first), the
way its users pick nodes_to_exclude by hand, side by side in one run.

Every row's trials are real (ONNX Runtime's quantizer with nodes_to_exclude, its runtime, the cell judged against
float64 on inputs calibration never saw, as `fpdiff quant` judges one); the same layers (an activation and the nodes
around it) in every mode. Modes:
- fpdiff: `fpdiff plan MODEL --precision int8 --backend ort` (its ranking: quant's per-layer readings; its search:
  prefixes doubled, bisected, then pruned);
- sqnr-search: the same search over the layers ranked by ORT's SQNR instead (the ranking alone compared);
- sqnr-one-by-one: layers left float one more at a time in ORT's SQNR order until the model passes (the hand
  workflow), at most --cap evaluations.

    python bench/quant_plan.py [--models gemma2,qwen2,t5,mobilenet_v2,minilm] [--tolerance 0.05] [--json OUT]
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


def one_by_one(cap: int):
    """The search replaced by the hand workflow: one more layer float each evaluation, in rank order."""
    def search(layers, evaluate):
        t: Trial | None = None
        for k in range(1, min(len(layers), cap) + 1):
            t = evaluate(layers[:k])
            if t.passed:
                return list(layers[:k]), t
        return None
    return search


def run(spec: str, tolerance: float) -> dict:
    import fpdiff
    t0 = time.perf_counter()
    # no compile cache: every mode quantizes, exports and compiles what it tries itself (modes share keep-sets)
    p = fpdiff.plan(spec, precision="int8", backend="ort", tolerance=tolerance, cache_dir=False)
    return {"passed": p.passed, "pure": p.pure_error, "error": p.error, "layers": p.units,
            "kept_layers": round((1 - p.low_fraction) * p.units) if p.passed else None, "nodes": len(p.keep),
            "evaluations": p.evaluations, "seconds": round(time.perf_counter() - t0, 1), "message": p.message[:200]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="gemma2,qwen2,t5,mobilenet_v2,minilm")
    ap.add_argument("--tolerance", type=float, default=0.05)
    ap.add_argument("--cap", type=int, default=40)
    ap.add_argument("--modes", default="fpdiff,sqnr-search,sqnr-one-by-one")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    from fpdiff.sources import load
    rows = []
    ours_search = planned.search
    ours_ranked = planned.ranked_layers
    for name in a.models.split(","):
        spec = name if name.endswith(".py") else str(SPECS / f"{name}.py")
        src = load(spec)
        feeds = {n: np.asarray(x.float() if x.is_floating_point() else x) for n, x in
                 zip(src.input_names, src.inputs)}
        for mode in a.modes.split(","):
            planned.search, planned.ranked_layers = ours_search, ours_ranked
            if mode.startswith("sqnr"):
                with_sqnr_ranking(lambda cell, given=feeds: given)
            if mode == "sqnr-one-by-one":
                planned.search = one_by_one(a.cap)
            try:
                row = {"model": name, "mode": mode, **run(spec, a.tolerance)}
            except Exception as e:  # one model's failure is its row
                row = {"model": name, "mode": mode, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            rows.append(row)
            print(json.dumps(row), flush=True)
    planned.search, planned.ranked_layers = ours_search, ours_ranked
    if a.json:
        Path(a.json).write_text(json.dumps({"tolerance": a.tolerance, "rows": rows}, indent=1))
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
