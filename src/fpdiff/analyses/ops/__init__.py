"""ops declared: every op of the catalogs, under variants, on every backend, judged by float64."""
from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET

from fpdiff.analyses import SWEEP, Analysis
from fpdiff.analyses.args import csv, grid, repro_dir, sweep
from fpdiff.analyses.ops import page, text
from fpdiff.analysis.ops import (
    DEFAULT_BACKENDS,
    DEFAULT_PRECISIONS,
    SHARED_DEFAULTS,
    OpsOptions,
    OpsResult,
    ops,
    stored,
)
from fpdiff.analysis.ops.batch import PROGRAM_SIZE
from fpdiff.report.junit import testcases, testsuite
from fpdiff.report.notebook import PLACE, cell_row


def _arguments(o: argparse.ArgumentParser) -> None:
    o.add_argument("--catalog", type=csv, default=["torch", "onnx"], help="comma list of torch,onnx (default both)")
    o.add_argument("--ops", type=csv, default=None, metavar="PATTERN[,PATTERN...]",
                   help="case-insensitive globs over op names (nn.functional.avg_pool2d, '*avg_pool*', AveragePool)")
    o.add_argument("--variants", type=csv, default=None, metavar="NAME,...",
                   help="variant generators, or default, all, sample (the catalogs' own samples only); "
                   "--list-variants says what each finds")
    o.add_argument("--variants-only", action="store_true",
                   help="run the variants' cases only, not the catalogs' own samples they derive from (the quantized "
                   "vocabulary alone: --catalog onnx --variants quantized,qdq --variants-only)")
    grid(o, DEFAULT_BACKENDS, DEFAULT_PRECISIONS)
    o.add_argument("--samples", type=int, default=1, help="catalog samples per op (default %(default)s)")
    o.add_argument("--per-program", type=int, default=PROGRAM_SIZE, metavar="N",
                   help="one-op cases of one kind exported and compiled together as one program, each judged on its "
                   "own outputs, every failing cell rerun alone (default %(default)s; 1: each case alone)")
    sweep(o, "no new batch starts after this long (90s, 10m, 2h); the rest is counted as unrun", "fpdiff-out/ops")
    o.add_argument("--save", metavar="TABLE", help="write the support table of this stack here (JSON; "
                   "fpdiff diff A.json B.json says what changed)")
    o.add_argument("--list-variants", action="store_true", help="list the variant generators and exit")


def _options(args: argparse.Namespace) -> OpsOptions:
    return OpsOptions(catalogs=args.catalog, patterns=args.ops, variants=args.variants, backends=args.backends,
                      precisions=args.precisions, samples=args.samples, time_budget=args.time, ray=args.ray,
                      repro_dir=repro_dir(args), resume=args.resume, program_size=args.per_program,
                      variants_only=args.variants_only)


def _list_variants(args: argparse.Namespace, console) -> int | None:
    if not args.list_variants:
        return None
    from fpdiff.analysis.ops.variants import DEFAULT_VARIANTS, VARIANTS
    for name, v in VARIANTS.items():
        console.print(f"{name:16s} {'(default) ' if name in DEFAULT_VARIANTS else ''}{v.doc}", highlight=False)
    return 0


def _save_table(args: argparse.Namespace, console, result: OpsResult) -> None:
    if args.save:
        result.save_table(args.save)  # a path it cannot write is its own one-line error
        console.print(f"support table: {args.save}", highlight=False)



def ops_rows(report: dict) -> list[dict]:
    """One row per op cell (case, backend, precision, shape variant)."""
    return [cell_row(c, OPS_PLACE) for c in report.get("cells") or []]


OPS_PLACE = ("op", "catalog", "case", "family", "variant", *PLACE)


def ops_suite(result, strict: bool = False) -> ET.ElementTree:
    """A testsuite for the sweep: a testcase per cell, failing as the sweep's exit code; declared refusals skip."""
    return testcases(testsuite(f"fpdiff {result.model}", result),
                  [(c, f"ops.{c.catalog}.{c.op}", f"{c.case} {c.backend} {c.precision} {c.shape_variant}",
                    result.cell_fails(c, strict), f"repro: {c.repro['path']}" if (c.repro or {}).get("path") else "")
                   for c in result.cells])


def ops_cells(result) -> list[tuple]:
    """An ops run's cells in the history's columns: the device column holds the case (the sweep runs on one device,
    and a cell is told apart by its case), so `fpdiff diff` keys a cell as backend/case/precision/shape variant."""
    return [(c.backend, c.case, c.precision, c.shape_variant, str(c.status), (c.metrics or {}).get("rel_l2"),
             (c.metrics or {}).get("max_norm"), c.reason, json.dumps([f.as_dict() for f in c.findings]))
            for c in result.cells]


OPS = Analysis(
    name="ops", summary="every op of the catalogs, under variants, on every backend, judged by float64", run=ops,
    options=OpsOptions, takes_model=False,
    shared=SWEEP,
    defaults=SHARED_DEFAULTS, arguments=_arguments, from_args=_options, cli_groups=("junit", "store"),
    epilog=lambda: "exit 0: no cell failed; 1: a cell is mismatch, error, crash or timeout; 2: usage error (an "
    "unknown op pattern lists the closest names)", progress_label="selecting cases", before=_list_variants,
    files=_save_table, terminal=text.render, html=page.body, rows=ops_rows, junit=ops_suite,
    cells=ops_cells, rejudge=stored.rejudge, names={"OpsResult": OpsResult, "OpsOptions": OpsOptions})
