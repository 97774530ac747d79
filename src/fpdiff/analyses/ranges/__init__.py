"""ranges declared: the range of every float64 intermediate, judged for fp16 and bf16."""
from __future__ import annotations

import argparse

from fpdiff.analyses import Analysis
from fpdiff.analyses.ranges import page, text
from fpdiff.analysis.ranges import RangesOptions, RangesResult, ranges
from fpdiff.report.notebook import spread


def _arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("--precision", dest="precisions", default="fp16,bf16",
                   help="comma list of fp16,bf16 (default %(default)s)")
    r.add_argument("--all", action="store_true", help="every op, not only those with findings")



def ranges_rows(report: dict) -> list[dict]:
    """One row per op, each precision's judgement in columns named after it (fp16_overflow, bf16_risks, ...)."""
    rows = []
    for op in report.get("ops") or []:
        judged = {k: v for name, d in (op.get("dtypes") or {}).items() for k, v in spread(d, f"{name}_").items()}
        rows.append({**{k: v for k, v in op.items() if k != "dtypes"}, **judged})
    return rows


RANGES = Analysis(
    name="ranges", summary="ranges of every float64 intermediate, judged for fp16 and bf16", run=ranges,
    options=RangesOptions, model_help="spec .py, .pt2, hf:DIR or example:NAME", shared=("seed", "task"),
    arguments=_arguments,
    progress_label="ranges: every float64 intermediate", view=lambda args: {"show_all": args.all},
    terminal=text.render, html=page.body, rows=ranges_rows,
    names={"RangesResult": RangesResult, "RangesOptions": RangesOptions})
