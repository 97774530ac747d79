"""ops declared: every op of the catalogs, under variants, on every backend, judged by float64."""
from __future__ import annotations

import argparse

from fpdiff.analyses import SWEEP, Analysis
from fpdiff.analyses.args import csv, grid, repro_dir, sweep
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
from fpdiff.report import html, junit, notebook, store, terminal


def _arguments(o: argparse.ArgumentParser) -> None:
    o.add_argument("--catalog", type=csv, default=["torch", "onnx"], help="comma list of torch,onnx (default both)")
    o.add_argument("--ops", type=csv, default=None, metavar="PATTERN[,PATTERN...]",
                   help="case-insensitive globs over op names (nn.functional.avg_pool2d, '*avg_pool*', AveragePool)")
    o.add_argument("--variants", type=csv, default=None, metavar="NAME,...",
                   help="variant generators, or default, all, sample (the catalogs' own samples only); "
                   "--list-variants says what each finds")
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
                      repro_dir=repro_dir(args), resume=args.resume, program_size=args.per_program)


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


OPS = Analysis(
    name="ops", summary="every op of the catalogs, under variants, on every backend, judged by float64", run=ops,
    options=OpsOptions, takes_model=False,
    shared=SWEEP,
    defaults=SHARED_DEFAULTS, arguments=_arguments, from_args=_options, cli_groups=("junit", "store"),
    epilog=lambda: "exit 0: no cell failed; 1: a cell is mismatch, error, crash or timeout; 2: usage error (an "
    "unknown op pattern lists the closest names)", progress_label="selecting cases", before=_list_variants,
    files=_save_table, terminal=terminal.render_ops, html=html.ops_body, rows=notebook.ops_rows, junit=junit.ops_suite,
    cells=store.ops_cells, rejudge=stored.rejudge, names={"OpsResult": OpsResult, "OpsOptions": OpsOptions})
