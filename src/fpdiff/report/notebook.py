"""How a notebook shows a result: its HTML report's body as a fragment (`_repr_html_`), what the terminal shows
(`print(result)`) and its rows for a DataFrame (`to_pandas()`). view() makes one from an analysis's renderers; the
rows of fpdiff's own analyses are laid out here, each from the JSON report (so a DataFrame holds the report's data),
and each declaration names its own."""
from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from functools import partial

from rich.console import Console

from fpdiff.analysis.base import Result, View, default_rows
from fpdiff.report import html, terminal
from fpdiff.report.json_report import cleaned

Rows = Callable[[dict], list[dict]]
TEXT_WIDTH = 120  # columns of print(result) where the output is no terminal (a notebook's is none)
PLACE = ("backend", "device", "precision", "shape_variant", "status")  # where a check cell ran, and its verdict
OPS_PLACE = ("op", "catalog", "case", "family", "variant", *PLACE)


def view(body: Callable[[dict], str], render: Callable[..., None], rows: Rows | None = None) -> View:
    """The notebook view of an analysis: its HTML body as a fragment, its terminal renderer as text, its rows as it
    declares them (else the report's cells, or one row of its fields)."""
    lay_out = rows or default_rows
    return View(html=partial(_fragment, body=body), text=partial(text, render=render),
                rows=partial(_rows, lay_out=lay_out))


def _fragment(result: Result, body: Callable[[dict], str]) -> str:
    return html.fragment(cleaned(result.as_dict()), body)


def _rows(result: Result, lay_out: Rows) -> list[dict]:
    return lay_out(cleaned(result.as_dict()))


def text(result: Result, render: Callable[..., None], width: int | None = None) -> str:
    """What the terminal shows of a result, then what to run next, as plain text (no colour codes), `width` columns
    wide (default: the terminal's, or TEXT_WIDTH where there is none)."""
    out = io.StringIO()
    width = width or shutil.get_terminal_size((TEXT_WIDTH, 24)).columns
    terminal.show(result, render, Console(file=out, width=width, color_system=None, force_terminal=False,
                                          force_jupyter=False))
    return out.getvalue().rstrip("\n")


def _spread(values: dict | None, prefix: str = "") -> dict:
    """A nested record's fields as columns of their own, named with `prefix`."""
    return {f"{prefix}{k}": v for k, v in (values or {}).items()}


def _cell_row(cell: dict, place: tuple[str, ...]) -> dict:
    """A cell as one row: where it ran and its verdict, its error metrics one column each (its baseline's prefixed
    baseline_), then its other fields as the report holds them (reason, findings, ...)."""
    rest = {k: v for k, v in cell.items() if k not in place and k not in ("metrics", "baseline_metrics")}
    return {**{k: cell.get(k) for k in place if k in cell}, **_spread(cell.get("metrics")), **rest,
            **_spread(cell.get("baseline_metrics"), "baseline_")}


def check_rows(report: dict) -> list[dict]:
    """One row per cell (backend, device, precision, shape variant)."""
    return [_cell_row(c, PLACE) for c in report.get("cells") or []]


def ops_rows(report: dict) -> list[dict]:
    """One row per op cell (case, backend, precision, shape variant)."""
    return [_cell_row(c, OPS_PLACE) for c in report.get("cells") or []]


def locate_rows(report: dict) -> list[dict]:
    """What locate reports, one row each, `row` saying which: the ops of torch's analysis, the segment a backend
    gets wrong, the tensors of a mark-all run."""
    ops = [{"row": "op", **o} for o in report.get("ops") or []]
    segment = [{"row": "segment", **report["segment"]}] if report.get("segment") else []
    tensors = [{"row": "tensor", **t} for t in (report.get("mark_all") or {}).get("rows") or []]
    return ops + segment + tensors


def ranges_rows(report: dict) -> list[dict]:
    """One row per op, each precision's judgement in columns named after it (fp16_overflow, bf16_risks, ...)."""
    rows = []
    for op in report.get("ops") or []:
        judged = {k: v for name, d in (op.get("dtypes") or {}).items() for k, v in _spread(d, f"{name}_").items()}
        rows.append({**{k: v for k, v in op.items() if k != "dtypes"}, **judged})
    return rows


def plan_rows(report: dict) -> list[dict]:
    """One row per op the plan keeps in fp32, with the evidence for keeping it."""
    return [dict(k) for k in report.get("keep") or []]


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

