"""check declared: the precision x backend x shape grid, judged by float64."""
from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET

from fpdiff.analyses import MODEL_RUN, Analysis
from fpdiff.analyses.args import csv
from fpdiff.analyses.check import page, text
from fpdiff.analysis.check import DEFAULT_BACKENDS, DEFAULT_REPEAT, Cell, CheckOptions, CheckResult, check, stored
from fpdiff.core.precision import DEFAULT_PRECISIONS, PRECISIONS
from fpdiff.core.status import NOTHING_JUDGED, fails
from fpdiff.report.junit import testcases, testsuite
from fpdiff.report.notebook import PLACE, cell_row


def _arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("--backends", type=csv, default=list(DEFAULT_BACKENDS),
                   help=f"comma list (default {','.join(DEFAULT_BACKENDS)})")
    c.add_argument("--precisions", type=csv, default=list(DEFAULT_PRECISIONS),
                   help=f"comma list of {','.join(PRECISIONS)} (default {','.join(DEFAULT_PRECISIONS)})")
    c.add_argument("--devices", type=csv, default=None, help="comma list of cpu,cuda (default: --device)")
    c.add_argument("--shape-variants", type=csv, default=None, help="only these variants (static,dynamic,...)")
    c.add_argument("--allow-nonfinite", action="store_true", help="run even if inputs hold NaN/Inf")
    c.add_argument("--artifact", action="append", default=[], metavar="BACKEND[:PRECISION]=PATH",
                   help="run your own converted file (.pte, .tflite, .onnx) on BACKEND in place of fpdiff's "
                   "conversion, judged against MODEL's float64 at the precision the file computes in (or PRECISION); "
                   "inputs matched by name, then position; repeatable")
    c.add_argument("--strict", action="store_true",
                   help="exit 1 unless every cell passes with no dtype-changed, coarser-than-requested or "
                        "computed-wider finding")
    c.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                   help="runs per cell; outputs that differ bitwise are flagged nondeterministic (default %(default)s)")
    c.add_argument("--keep-opset", action="store_true",
                   help="judge an old-opset ONNX model as given, without converting it to the current opset")


def _options(args: argparse.Namespace) -> CheckOptions:
    return CheckOptions(backends=args.backends, precisions=args.precisions, devices=args.devices or [args.device],
                        shape_variants=args.shape_variants, allow_nonfinite=args.allow_nonfinite, repeat=args.repeat,
                        keep_opset=args.keep_opset, artifacts=args.artifact)


def _epilog() -> str:
    return ("exit 0: every judged cell holds; 1: a cell is mismatch, error, crash or timeout (--strict: not a clean "
            f"pass); 2: usage or input error; {NOTHING_JUDGED}: nothing was judged and nothing failed (every cell "
            "unsupported or unjudged, or the model's float64 reference did not run)")



def check_rows(report: dict) -> list[dict]:
    """One row per cell (backend, device, precision, shape variant)."""
    return [cell_row(c, PLACE) for c in report.get("cells") or []]


def check_suite(result, strict: bool = False) -> ET.ElementTree:
    """A testsuite for the model; failures, skips (declared refusals) and passes follow check's exit rule."""
    suite = testsuite(f"fpdiff check {result.model}", result)
    if result.judge:
        ET.SubElement(suite.find("properties"), "property", name="judge", value=str(result.judge.get("status", "")))
    return testcases(suite, [(c, f"fpdiff.{c.backend}", f"{c.backend}/{c.device}/{c.precision}/{c.shape_variant}",
                           fails(c.status, [f.kind for f in c.findings], strict), "") for c in result.cells])


def check_cells(result) -> list[tuple]:
    return [(c.backend, c.device, c.precision, c.shape_variant, str(c.status), (c.metrics or {}).get("rel_l2"),
             (c.metrics or {}).get("max_norm"), c.reason, json.dumps([f.as_dict() for f in c.findings]))
            for c in result.cells]


CHECK = Analysis(
    name="check", summary="the precision x backend x shape grid, judged by float64", run=check, options=CheckOptions,
    shared=MODEL_RUN,
    arguments=_arguments, from_args=_options, cli_groups=("device", "junit", "store"), epilog=_epilog,
    progress_label="loading the model", terminal=text.render, html=page.body, rows=check_rows,
    junit=check_suite, cells=check_cells, rejudge=stored.rejudge,
    names={"CheckResult": CheckResult, "Cell": Cell, "CheckOptions": CheckOptions})
