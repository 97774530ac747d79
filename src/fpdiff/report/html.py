"""One self-contained HTML file per run, from its JSON report: it opens offline, with no server and no script.
Plots are matplotlib figures inlined as SVG: a plotting library people already trust, no JavaScript to load or to
fail, and a file of tens of kilobytes (an interactive library would embed megabytes of JavaScript). Hover text is
the browser's own `title`. matplotlib is optional (`fpdiff[html]`): without it the report is written whole, with a
line where each plot would be. Each analysis's page body lives beside its declaration (fpdiff/analyses/NAME/page.py);
here is what they share: the page and the notebook fragment, escaping, colours, plots."""
from __future__ import annotations

import html
import io
import re
import sys
from collections.abc import Callable

from fpdiff.core.status import Status
from fpdiff.sources.base import display_name

NO_PLOTS = "plots need matplotlib: pip install 'fpdiff[html]'"
STYLE = """body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px}table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #bbb;padding:4px 8px;font-size:13px;vertical-align:top}th{background:#f5f5f5}
td.cell{text-align:center;min-width:90px}.muted{color:#666;font-size:12px}.legend span{padding:2px 8px;margin-right:6px}
.finding{margin:6px 0}.remedy{color:#2e7d32}"""


FRAGMENT = "fpdiff-result"  # the one class a notebook fragment's CSS is scoped under
# the page's classes, named fpdiff-* in a fragment: a notebook's own CSS (a `.cell` of its own) cannot reach them
OWN_CLASSES = ("cell", "muted", "legend", "finding", "remedy")
# a notebook's theme is its own: text takes its colour, lines and headers a grey that reads on light and dark, and
# only what has its own light background (a cell's verdict colour, a plot) sets a dark text on it; tables keep each
# value on one line and scroll sideways in a narrow output
FRAGMENT_RULES = (
    ("", "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.45;color:inherit;"
         "max-width:100%;overflow-x:auto;text-align:left"),
    (".fpdiff-title", "font-size:15px;font-weight:600;margin:2px 0 6px"),
    (".fpdiff-h", "font-size:14px;font-weight:600;margin:14px 0 4px"),
    ("p", "margin:4px 0"),
    ("table", "border-collapse:collapse;table-layout:auto;margin:6px 0;width:auto"),
    ("td, th", "border:1px solid rgba(127,127,127,.45);padding:3px 8px;font-size:12px;vertical-align:top;"
               "text-align:left;white-space:nowrap;color:inherit;background:transparent"),
    ("th", "background:rgba(127,127,127,.16);font-weight:600"),
    ("td.fpdiff-cell", "text-align:center;min-width:80px"),
    ("[style*=background]", "color:#1a1a1a"),
    (".fpdiff-muted", "opacity:.75;font-size:11px"),
    (".fpdiff-legend span", "padding:1px 7px;margin-right:5px;border-radius:3px"),
    (".fpdiff-finding", "margin:4px 0"),
    (".fpdiff-remedy", "color:#43a047"),
    ("code", "font-size:12px"),
    ("svg", "max-width:100%;height:auto;background:#fff;border-radius:4px"),
)


def _scope(selector: str) -> str:
    """A selector list confined to the fragment: each selector under FRAGMENT (the empty one is FRAGMENT itself)."""
    return ",".join(f".{FRAGMENT} {s.strip()}".rstrip() for s in selector.split(","))


FRAGMENT_STYLE = "".join(f"{_scope(selector)}{{{rules}}}" for selector, rules in FRAGMENT_RULES)


def fragment(report: dict, body: Callable[[dict], str]) -> str:
    """An analysis's report for a notebook's output: its body without the page (no html, head or body, nothing to
    fetch, no script), its CSS scoped under FRAGMENT so it cannot restyle the notebook around it."""
    title = f"fpdiff {report.get('kind', '')} {display_name(str(report.get('model', '')))}"
    inner = _scoped_svg(_own_classes(_no_headings(body(report))))
    return (f"<div class='{FRAGMENT}'><style>{FRAGMENT_STYLE}</style><div class='fpdiff-title'>{esc(title)}</div>"
            f"{inner}</div>")


def _no_headings(text: str) -> str:
    """Section titles as styled lines, not headings: a notebook lists every heading of an output in its table of
    contents and gives each an anchor."""
    return re.sub(r"<(/?)h[1-6]\b[^>]*>", lambda m: "</div>" if m.group(1) else "<div class='fpdiff-h'>", text)


def _own_classes(text: str) -> str:
    """The page's classes (OWN_CLASSES) renamed fpdiff-*; a class of the analysis's own is left as it is."""
    def rename(m: re.Match) -> str:
        names = (f"fpdiff-{c}" if c in OWN_CLASSES else c for c in m.group(1).split())
        return f"class='{' '.join(names)}'"
    return re.sub(r"class='([^']*)'", rename, text)


def _scoped_svg(text: str) -> str:
    """The plots' own CSS (matplotlib's `*{...}` rule) scoped to them, and the ids nothing refers to dropped: every
    figure names its groups figure_1, axes_1, ..., which would repeat across a notebook's outputs."""
    text = re.sub(r"(<style[^>]*>)\s*\*\s*\{", rf"\1.{FRAGMENT} svg *{{", text)
    used = set(re.findall(r"(?:href=\"#|url\(#)([^\")]+)", text))
    return re.sub(r'\sid="([^"]+)"', lambda m: m.group(0) if m.group(1) in used else "", text)


def render(report: dict, body: Callable[[dict], str]) -> str:
    """The HTML page of an analysis's JSON report, its body drawn by that analysis's `body` (its declaration's)."""
    if not plots_available():
        print(f"fpdiff: HTML report without plots: {NO_PLOTS}", file=sys.stderr)
    kind = report.get("kind", "")
    title = f"fpdiff {kind} {display_name(str(report.get('model', '')))}"
    body = body(report)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{esc(title)}</h1>{body}</body></html>")


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def plotted(title: str, draw: Callable[..., str], *args) -> str:
    """A section's plot, or where matplotlib is missing the line that says how to get it."""
    if not plots_available():
        return f"<h2>{esc(title)}</h2><p class='muted'>{esc(NO_PLOTS)}</p>"
    drawn = draw(*args)
    return f"<h2>{esc(title)}</h2>{drawn}" if drawn else ""


def colour(status: str) -> str:
    try:
        return Status(status).colour
    except ValueError:  # a status a newer fpdiff wrote: shown, uncoloured
        return "#fff"


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def err(x) -> str:
    return "-" if x is None else (f"{x:.1e}" if isinstance(x, (int, float)) else str(x))


def svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def figure(width: float = 11, height: float = 4):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small, searchable
    return plt.subplots(figsize=(width, height))


def op_axis(fig, ax, ops: list[dict], title: str) -> str:
    """A log y axis over the ops in graph order, each named by op and source line when there are few enough."""
    ax.set_yscale("log")
    ax.set_xlabel("op, in graph order")
    if len(ops) <= 60:
        ax.set_xticks(range(len(ops)), [f"{o['op']} ({o['source'].rsplit('/', 1)[-1]})" for o in ops], rotation=70,
                      fontsize=7, ha="right")
    ax.legend(fontsize=8)
    ax.set_title(title)
    return svg(fig)


def finding_list(items: list[tuple[str, dict]]) -> str:
    if not items:
        return "<p class='muted'>No findings.</p>"
    out = []
    for where, f in items:
        remedy = f"<div class='remedy'>remedy: {esc(f['remedy'])}</div>" if f.get("remedy") else ""
        out.append(f"<div class='finding'><b>{esc(f['kind'])}</b> in {esc(where)}: {esc(f['message'])}{remedy}</div>")
    return "".join(out)


def versions_line(report: dict) -> str:
    v = report.get("versions") or {}
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(x)}</td></tr>" for k, x in v.items() if x)
    return f"<h2>Versions</h2><table><tr><th>component</th><th>version</th></tr>{rows}</table>" if rows else ""


def next_list(r: dict) -> str:
    """The commands that explain the report's failing cells."""
    rows = "".join(f"<li><code>{esc(c)}</code></li>" for c in r.get("next") or [])
    return f"<h2>Next</h2><p>To see why:</p><ul>{rows}</ul>" if rows else ""


