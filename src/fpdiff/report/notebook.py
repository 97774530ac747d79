"""How a notebook shows a result: its HTML report's body as a fragment (`_repr_html_`), what the terminal shows
(`print(result)`) and its rows for a DataFrame (`to_pandas()`). view() makes one from an analysis's renderers; each
declaration lays out its own rows from its JSON report (so a DataFrame holds the report's data), with the cell rows
and spreads here."""
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


def spread(values: dict | None, prefix: str = "") -> dict:
    """A nested record's fields as columns of their own, named with `prefix`."""
    return {f"{prefix}{k}": v for k, v in (values or {}).items()}


def cell_row(cell: dict, place: tuple[str, ...]) -> dict:
    """A cell as one row: where it ran and its verdict, its error metrics one column each (its baseline's prefixed
    baseline_), then its other fields as the report holds them (reason, findings, ...)."""
    rest = {k: v for k, v in cell.items() if k not in place and k not in ("metrics", "baseline_metrics")}
    return {**{k: cell.get(k) for k in place if k in cell}, **spread(cell.get("metrics")), **rest,
            **spread(cell.get("baseline_metrics"), "baseline_")}


