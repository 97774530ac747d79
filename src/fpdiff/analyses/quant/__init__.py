"""quant declared: quantized formats per backend, judged against float64 and the exact emulation of each quantized
model."""
from __future__ import annotations

import argparse
import json

from fpdiff.analyses import Analysis
from fpdiff.analyses.args import csv
from fpdiff.analyses.quant import page, text
from fpdiff.analysis.quant import DEFAULT_SAMPLES, DEFAULT_SCHEMES, QuantOptions, QuantResult, quant
from fpdiff.core.precision import QUANTIZED
from fpdiff.core.status import NOTHING_JUDGED
from fpdiff.report.notebook import PLACE, cell_row


def _arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--schemes", type=csv, default=list(DEFAULT_SCHEMES),
                   help=f"comma list of {','.join(QUANTIZED)} (default {','.join(DEFAULT_SCHEMES)})")
    c.add_argument("--backends", type=csv, default=["ort"], help="comma list of backends with a quantization path "
                   "(default ort)")
    c.add_argument("--calibration", default=None, metavar="FILE.npz",
                   help="calibration inputs: one array per model input, named by it, samples along the first axis "
                   f"(default: {DEFAULT_SAMPLES} drawn like the example inputs); the cells are judged on the example "
                   "inputs, which calibration never sees")
    c.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                   help="calibration inputs drawn when no --calibration is given (default %(default)s)")
    c.add_argument("--artifact", dest="artifacts", action="append", default=[], metavar="BACKEND=PATH",
                   help="your own quantized file (a QDQ or QOperator .onnx) run on BACKEND as it is, its scales, zero "
                   "points and format read from it, judged against MODEL's float64; repeatable. A quantized MODEL "
                   "is judged against its own emulation alone")
    c.add_argument("--strict", action="store_true", help="exit 1 unless every judged cell passes with no finding")


def _epilog() -> str:
    return ("exit 0: every judged cell holds (pass or quantization-loss); 1: a cell is mismatch or error; 2: usage "
            f"or input error; {NOTHING_JUDGED}: nothing was judged (every cell unsupported)")


def quant_cells(result) -> list[tuple]:
    return [(c.backend, c.device, c.precision, c.shape_variant, str(c.status), (c.metrics or {}).get("rel_l2"),
             (c.metrics or {}).get("departure"), c.reason, json.dumps([f.as_dict() for f in c.findings]))
            for c in result.cells]


QUANT = Analysis(
    name="quant", summary="quantized formats per backend, judged against float64 and the format's exact emulation",
    run=quant, options=QuantOptions, model_help="spec .py, .onnx, hf:DIR or example:NAME",
    shared=("plugins", "backend_flags", "timeout", "seed", "cache_dir", "inputs", "shapes", "task", "progress",
            "routes"),
    arguments=_arguments, epilog=_epilog, cli_groups=("store",), progress_label="quant: loading the model",
    terminal=text.render, html=page.body, rows=lambda r: [cell_row(c, PLACE) for c in r.get("cells") or []],
    cells=quant_cells, names={"QuantResult": QuantResult, "QuantOptions": QuantOptions})
