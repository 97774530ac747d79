"""ranges declared: the range of every float64 intermediate, judged for fp16 and bf16."""
from __future__ import annotations

import argparse

from fpdiff.analyses import Analysis
from fpdiff.analysis.ranges import RangesOptions, RangesResult, ranges
from fpdiff.report import html, notebook, terminal


def _arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("--precision", dest="precisions", default="fp16,bf16",
                   help="comma list of fp16,bf16 (default %(default)s)")
    r.add_argument("--all", action="store_true", help="every op, not only those with findings")


RANGES = Analysis(
    name="ranges", summary="ranges of every float64 intermediate, judged for fp16 and bf16", run=ranges,
    options=RangesOptions, model_help="spec .py, .pt2, hf:DIR or example:NAME", shared=("seed", "task"),
    arguments=_arguments,
    progress_label="ranges: every float64 intermediate", view=lambda args: {"show_all": args.all},
    terminal=terminal.render_ranges, html=html.ranges_body, rows=notebook.ranges_rows,
    names={"RangesResult": RangesResult, "RangesOptions": RangesOptions})
