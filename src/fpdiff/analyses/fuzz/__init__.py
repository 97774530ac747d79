"""fuzz declared: random graphs of the catalog's ops on every backend, judged by float64, failures minimized and
deduplicated."""
from __future__ import annotations

import argparse

from fpdiff.analyses import SWEEP, Analysis
from fpdiff.analyses.args import csv, grid, repro_dir, sweep
from fpdiff.analyses.fuzz import page, text
from fpdiff.analysis.fuzz import (
    DEFAULT_BACKENDS,
    DEFAULT_PRECISIONS,
    SHARED_DEFAULTS,
    FuzzOptions,
    FuzzResult,
    fuzz,
    stored,
)
from fpdiff.core.status import NOTHING_JUDGED


def _arguments(f: argparse.ArgumentParser) -> None:
    grid(f, DEFAULT_BACKENDS, DEFAULT_PRECISIONS)
    f.add_argument("--graphs", type=int, default=None, metavar="N",
                   help="graphs to generate (default 50 when --time is not given)")
    f.add_argument("--ops", type=csv, default=None, metavar="PATTERN[,PATTERN...]",
                   help="case-insensitive globs over the vocabulary's ops and their catalog names ('*softmax*')")
    f.add_argument("--max-ops", type=int, default=6, help="ops per graph at most (default %(default)s)")
    f.add_argument("--forms", type=csv, default=None, metavar="torch,onnx,qdq,quantize",
                   help="graph forms: torch programs (every backend), ONNX graphs (ONNX backends), qdq (the ONNX graph "
                   "quantized by ONNX Runtime's quantizer), quantize (the torch program quantized by each backend's "
                   "own quantizer at int8); the quantized forms judged against their exact emulation; default "
                   "torch,onnx")
    sweep(f, "no new graph starts after this long (90s, 10m, 2h); found failures are still minimized",
          "fpdiff-out/fuzz")


def _options(args: argparse.Namespace) -> FuzzOptions:
    return FuzzOptions(backends=args.backends, precisions=args.precisions, graphs=args.graphs, time_budget=args.time,
                       ops=args.ops, max_ops=args.max_ops, forms=args.forms, ray=args.ray, resume=args.resume,
                       repro_dir=repro_dir(args))



def fuzz_rows(report: dict) -> list[dict]:
    """One row per graph cell (a graph on one backend at one precision), the graph's fields beside it; a graph with
    no cell (discarded) is one row with none."""
    rows = []
    for record in report.get("records") or []:
        graph = {k: v for k, v in record.items() if k != "statuses"}
        cells = (record.get("statuses") or {}).items() or [(None, None)]
        for where, status in cells:
            backend, _, precision = (where or "").rpartition("/")
            rows.append({**graph, "backend": backend or None, "precision": precision or None, "status": status})
    return rows


FUZZ = Analysis(
    name="fuzz", summary="random graphs of the catalog's ops on every backend, judged by float64, failures "
    "minimized and deduplicated", run=fuzz, options=FuzzOptions, takes_model=False,
    shared=SWEEP,
    defaults=SHARED_DEFAULTS, arguments=_arguments, from_args=_options,
    epilog=lambda: f"exit 0: no finding; 1: a finding; {NOTHING_JUDGED}: no graph could be judged; 2: usage error",
    progress_label="generating graphs", progress_unit="graphs", terminal=text.render,
    html=page.body, rows=fuzz_rows, rejudge=stored.rejudge,
    names={"FuzzResult": FuzzResult, "FuzzOptions": FuzzOptions})
