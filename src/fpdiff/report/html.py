"""One self-contained HTML file per run, from its JSON report: it opens offline, with no server and no script.
Plots are matplotlib figures inlined as SVG: a plotting library people already trust, no JavaScript to load or to
fail, and a file of tens of kilobytes (an interactive library would embed megabytes of JavaScript). Hover text is
the browser's own `title`. matplotlib is optional (`fpdiff[html]`): without it the report is written whole, with a
line where each plot would be."""
from __future__ import annotations

import html
import io
import math
import re
import sys
from collections.abc import Callable

from fpdiff.core.status import CELL_STATUSES, FAILING, Status
from fpdiff.sources.base import display_name

NO_PLOTS = "plots need matplotlib: pip install 'fpdiff[html]'"
LIMITS = {"fp16 max (65504)": 65504.0, "fp16 smallest normal (6.1e-5)": 6.103515625e-05,
          "fp16 smallest subnormal (6e-8)": 5.960464477539063e-08}
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
    return (f"<div class='{FRAGMENT}'><style>{FRAGMENT_STYLE}</style><div class='fpdiff-title'>{_e(title)}</div>"
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
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{_e(title)}</h1>{body}</body></html>")


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _plotted(title: str, draw: Callable[..., str], *args) -> str:
    """A section's plot, or where matplotlib is missing the line that says how to get it."""
    if not plots_available():
        return f"<h2>{_e(title)}</h2><p class='muted'>{_e(NO_PLOTS)}</p>"
    drawn = draw(*args)
    return f"<h2>{_e(title)}</h2>{drawn}" if drawn else ""


def _colour(status: str) -> str:
    try:
        return Status(status).colour
    except ValueError:  # a status a newer fpdiff wrote: shown, uncoloured
        return "#fff"


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _err(x) -> str:
    return "-" if x is None else (f"{x:.1e}" if isinstance(x, (int, float)) else str(x))


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(width: float = 11, height: float = 4):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small, searchable
    return plt.subplots(figsize=(width, height))


def _op_axis(fig, ax, ops: list[dict], title: str) -> str:
    """A log y axis over the ops in graph order, each named by op and source line when there are few enough."""
    ax.set_yscale("log")
    ax.set_xlabel("op, in graph order")
    if len(ops) <= 60:
        ax.set_xticks(range(len(ops)), [f"{o['op']} ({o['source'].rsplit('/', 1)[-1]})" for o in ops], rotation=70,
                      fontsize=7, ha="right")
    ax.legend(fontsize=8)
    ax.set_title(title)
    return _svg(fig)


def _findings(items: list[tuple[str, dict]]) -> str:
    if not items:
        return "<p class='muted'>No findings.</p>"
    out = []
    for where, f in items:
        remedy = f"<div class='remedy'>remedy: {_e(f['remedy'])}</div>" if f.get("remedy") else ""
        out.append(f"<div class='finding'><b>{_e(f['kind'])}</b> in {_e(where)}: {_e(f['message'])}{remedy}</div>")
    return "".join(out)


def _versions(report: dict) -> str:
    v = report.get("versions") or {}
    rows = "".join(f"<tr><td>{_e(k)}</td><td>{_e(x)}</td></tr>" for k, x in v.items() if x)
    return f"<h2>Versions</h2><table><tr><th>component</th><th>version</th></tr>{rows}</table>" if rows else ""


def check_body(r: dict) -> str:
    cells = r["cells"]
    precisions = list(dict.fromkeys(c["precision"] for c in cells))
    judge = r.get("judge") or {}
    ref = r.get("reference") or {}
    out = [f"<p>Relative L2 against float64 ({_e(ref.get('backend'))} on {_e(ref.get('device'))}); judge "
           f"cross-check: <b>{_e(judge.get('status', 'n/a'))}</b>. {_e(judge.get('message', ''))}</p>",
           "<p class='legend'>" + "".join(f"<span style='background:{s.colour}'>{_e(s)}</span>" for s in CELL_STATUSES)
           + " hover a cell for its reason, findings and the rules that made its verdict</p>"]
    for variant in dict.fromkeys(c["shape_variant"] for c in cells):
        rows = {}
        for c in cells:
            if c["shape_variant"] == variant:
                rows.setdefault((c["backend"], c["device"]), {})[c["precision"]] = c
        head = "".join(f"<th>{_e(p)}</th>" for p in precisions)
        lines = []
        for (b, d), by_p in rows.items():
            tds = []
            for p in precisions:
                c = by_p.get(p)
                if c is None:
                    tds.append("<td class='cell'>-</td>")
                    continue
                tip = (c["reason"] + "".join(f"\n{f['kind']}: {f['message']}" for f in c.get("findings", []))
                       + _provenance(c.get("revisions") or []))
                said = (c.get("info") or {}).get("artifact")
                if said:  # the user's own converted file ran in this cell
                    tip = f"your file {said} ({(c.get('info') or {}).get('artifact_precision', '')})\n" + tip
                err = (c.get("metrics") or {}).get("rel_l2")
                kinds = ", ".join(dict.fromkeys(f["kind"] for f in c.get("findings", [])))
                tds.append(f"<td class='cell' style='background:{_colour(c['status'])}' title='{_e(tip)}'>"
                           f"<b>{_e(c['status'])}</b><br>{_e(_err(err))}"
                           + (f"<br><span class='muted'>{_e(kinds)}</span>" if kinds else "") + "</td>")
            lines.append(f"<tr><th>{_e(b)} ({_e(d)})</th>{''.join(tds)}</tr>")
        out.append(f"<h2>Grid, shapes: {_e(variant)}</h2><table><tr><th>backend</th>{head}</tr>{''.join(lines)}"
                   "</table>")
    if any(c.get("metrics") for c in cells):
        out.append(_plotted("Errors", _error_bars, cells, precisions))
    found = [(f"{c['backend']}/{c['device']}/{c['precision']}/{c['shape_variant']}", f) for c in cells
             for f in c.get("findings", [])]
    out.append("<h2>Findings</h2>" + _findings(found))
    out.append(_next(r))
    return "".join(out) + _versions(r)


def _provenance(revisions: list[dict]) -> str:
    """How the verdict was reached: each rule that changed it, from what, to what, and why."""
    if not revisions:
        return ""
    return "\n\nverdict by rule:" + "".join(f"\n{v['rule']}: {v['from']} -> {v['to']} ({v['why']})"
                                          for v in revisions)


def _next(r: dict) -> str:
    """The commands that explain the report's failing cells."""
    rows = "".join(f"<li><code>{_e(c)}</code></li>" for c in r.get("next") or [])
    return f"<h2>Next</h2><p>To see why:</p><ul>{rows}</ul>" if rows else ""


def _error_bars(cells: list[dict], precisions: list[str]) -> str:
    """Each backend's error per precision, log scale, next to the tolerance: the grid as a picture."""
    static = [c for c in cells if c["shape_variant"] == cells[0]["shape_variant"] and (c.get("metrics") or {})]
    if not static:
        return ""
    backends = list(dict.fromkeys(c["backend"] for c in static))
    fig, ax = _figure(11, 3.6)
    width = 0.8 / max(1, len(backends))
    for i, b in enumerate(backends):
        xs, ys, cs = [], [], []
        for j, p in enumerate(precisions):
            c = next((c for c in static if c["backend"] == b and c["precision"] == p), None)
            err = (c.get("metrics") or {}).get("rel_l2") if c else None
            if isinstance(err, (int, float)) and math.isfinite(err) and err > 0:
                xs.append(j + i * width)
                ys.append(err)
                cs.append(_colour(c["status"]))
        ax.bar(xs, ys, width=width, color=cs, edgecolor="#333", label=b)
        for x, y in zip(xs, ys):
            ax.text(x, y, b, rotation=90, fontsize=7, ha="center", va="bottom")
    ax.set_yscale("log")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(precisions))], precisions)
    ax.set_ylabel("rel L2 vs float64")
    ax.set_title("error per backend and precision (bar color = verdict)")
    return _svg(fig)


def locate_body(r: dict) -> str:
    ops = r.get("ops") or []
    culprit = r.get("culprit") or {}
    out = [f"<p>Backend <b>{_e(r['backend'])}</b> at <b>{_e(r['precision'])}</b>; output error "
           f"{_e(_err(r.get('output_error')))}.</p>"]
    if culprit:
        out.append(f"<p><b>Culprit</b>: {_e(culprit.get('op'))} (node {_e(culprit.get('node'))}, module "
                   f"{_e(culprit.get('module') or '(root)')}, {_e(culprit.get('source'))}): {_e(culprit.get('cause'))}"
                   f", found by {_e(culprit.get('found_by'))}.</p>")
    else:
        out.append("<p>No culprit: every op stays within what the precision must lose.</p>")
    if ops:
        out.append(_plotted("Error profile", _profile, ops))
        rows = "".join(f"<tr><td>{o['index']}</td><td>{_e(o['op'])}</td><td>{_e(o['node'])}</td>"
                       f"<td>{_e(o.get('module') or o.get('stack') or '(root)')}</td><td>{_e(o['source'])}</td>"
                       f"<td>{_err(o.get('accumulated'))}</td><td>{_err(o.get('local'))}</td>"
                       f"<td>{_err(o.get('floor'))}</td></tr>" for o in ops)
        out.append("<h2>Ops</h2><table><tr><th>#</th><th>op</th><th>node</th><th>module</th><th>source</th>"
                   f"<th>accumulated</th><th>local</th><th>floor</th></tr>{rows}</table>")
    out.append("<h2>Findings</h2>" + _findings([(r["backend"], f) for f in r.get("findings") or []]))
    return "".join(out)


def _profile(ops: list[dict]) -> str:
    """Accumulated, local and floor error along the graph, log scale, the culprit marked."""
    fig, ax = _figure(12, 4.2)
    idx = list(range(len(ops)))

    def series(key):
        return [o[key] if isinstance(o.get(key), (int, float)) and o[key] and math.isfinite(o[key]) else None
                for o in ops]
    lines = (("accumulated", "-o", "accumulated (the P run vs float64)"),
             ("local", "s", "local (the op alone at P)"), ("floor", "--", "floor (what P must lose)"))
    for key, style, label in lines:
        ys = series(key)
        pts = [(i, y) for i, y in zip(idx, ys) if y is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label, markersize=4)
    finite = [y for k in ("accumulated", "local") for y in series(k) if y]
    top = max(finite) * 10 if finite else 1.0
    over = [i for i, o in enumerate(ops) if isinstance(o.get("accumulated"), str) or (
        isinstance(o.get("accumulated"), float) and not math.isfinite(o["accumulated"]))]
    if over:  # inf/NaN have no place on a log axis: drawn at the top, marked
        ax.plot(over, [top] * len(over), "x", color="#c62828", markersize=9, label="non-finite (inf/NaN)")
    bad = next((o["index"] for o in ops if o.get("culprit")), None)
    if bad is not None:
        ax.axvline(bad, color="#c62828", linewidth=2, label=f"culprit: {ops[bad]['op']}")
    ax.set_ylabel("rel L2 vs float64")
    return _op_axis(fig, ax, ops, "error profile along the graph")


def ranges_body(r: dict) -> str:
    ops = r["ops"]
    out = []
    if ops:
        out.append(_plotted("Ranges", _magnitudes, ops))
    risky = [(f"{o['op']} ({o['source']})", {"kind": ", ".join(d["risks"]), "message": f"at {name}" + (
              ": " + "; ".join(d["notes"]) if d.get("notes") else "")})
             for o in ops for name, d in o["dtypes"].items() if d.get("risks")]
    out.append("<h2>Risks</h2>" + _findings(risky))
    return "".join(out)


def _magnitudes(ops: list[dict]) -> str:
    """Each op's largest and smallest nonzero magnitude against fp16's limits."""
    fig, ax = _figure(12, 4.2)
    idx = list(range(len(ops)))
    ax.plot(idx, [o["max_abs"] or None for o in ops], "^", label="max |x|")
    ax.plot(idx, [o["min_abs"] if o.get("min_abs") else None for o in ops], "v", label="smallest nonzero |x|")
    for (label, v), color in zip(LIMITS.items(), ("#c62828", "#ef6c00", "#6a1b9a")):
        ax.axhline(v, color=color, linestyle="--", linewidth=1, label=label)
    return _op_axis(fig, ax, ops, "per-op magnitudes against fp16's limits (bf16 has fp32's range)")


def plan_body(r: dict) -> str:
    out = [f"<p>{_e(r['precision'])} on {_e(r['backend'])}, tolerance {_e(r['tolerance'])}: "
           f"<b>{'verified plan' if r.get('passed') else 'no plan'}</b>. Pure {_e(r['precision'])}: "
           f"{_e(_err(r.get('pure_error')))}; with the plan: {_e(_err(r.get('error')))}; "
           f"{(r.get('low_fraction') or 0):.1%} of the flops stay {_e(r['precision'])}.</p>"]
    rows = "".join(f"<tr><td>{_e(k['node'])}</td><td>{_e(k['op'])}</td><td>{_e(k.get('module') or '(root)')}</td>"
                   f"<td>{_e(k.get('source'))}</td><td>{_e('; '.join(k.get('why') or []))}</td></tr>"
                   for k in r.get("keep") or [])
    out.append("<h2>Ops kept in fp32</h2><table><tr><th>node</th><th>op</th><th>module</th><th>source</th>"
               f"<th>why</th></tr>{rows}</table>")
    errs = [("pure " + r["precision"], r.get("pure_error")), ("plan", r.get("error")),
            ("all fp32", r.get("fp32_error"))]
    errs = [(k, v) for k, v in errs if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    if errs:
        out.append(_plotted("Error", _plan_errors, errs, r["tolerance"]))
    if r.get("exports"):
        out.append(_plan_exports(r["exports"], r["tolerance"]))
    return "".join(out)


def _counts(d: dict | None) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted((d or {}).items()))


def _plan_exports(exports: list[dict], tolerance) -> str:
    """One row per export target: the file, written or not, where it ran and its error against the tolerance, the
    dtypes read back from it, and why it is not verified."""
    rows = []
    for e in exports:
        state = ("verified" if e.get("verified") else "written, NOT verified") if e.get("written") else "not written"
        runs = "<br>".join(f"{_e(x['backend'])} at {_e(x.get('precision'))}: "
                           + (f"{_e(_err(x['error']))} {'&le;' if x.get('passed') else '&gt;'} {_e(tolerance)}"
                              if x.get("error") is not None else _e(x.get("reason") or "did not run"))
                           + (f" (ran {_e(_counts(x.get('op_dtypes')))})" if x.get("op_dtypes") else "")
                           for x in e.get("runs") or [])
        why = "; ".join(_e(t) for t in (e.get("check"), e.get("reason")) if t)
        colour = _colour(Status.PASS if e.get("verified") else Status.MISMATCH)
        rows.append(f"<tr><td>{_e(e['target'])}</td><td>{_e(e['path'])}</td>"
                    f"<td style='background:{colour}'>{state}</td><td>{runs}</td>"
                    f"<td>{_e(_counts(e.get('op_dtypes')))}</td><td>{why}</td></tr>")
    return ("<h2>Exports</h2><table><tr><th>target</th><th>file</th><th>state</th><th>verified where (error vs "
            "tolerance)</th><th>ops read back</th><th>check, reason</th></tr>" + "".join(rows) + "</table>")


def _plan_errors(errs: list[tuple[str, float]], tolerance: float) -> str:
    """Pure precision, the plan and all-fp32 against the tolerance."""
    fig, ax = _figure(6, 3)
    ax.bar([k for k, _ in errs], [v for _, v in errs], color=["#ef9a9a", "#c8e6c9", "#90caf9"][:len(errs)])
    ax.axhline(tolerance, color="#333", linestyle="--", label="tolerance")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("error before and after the plan")
    return _svg(fig)


OPS_FAILING_ROWS = 500  # failing cells the page lists; a sweep's JSON holds them all


def _ops_counts(by_status: dict) -> str:
    """A matrix cell: its counts per status, worst first, the cell coloured by the worst."""
    if not by_status:
        return "<td class='cell'>-</td>"
    order = sorted(by_status, key=lambda s: -_rank(s))
    text = "<br>".join(f"{by_status[s]} {_e(s)}" for s in order if by_status[s])
    return f"<td class='cell' style='background:{_colour(order[0])}'>{text}</td>"


def _rank(status: str) -> int:
    try:
        return Status(status).rank
    except ValueError:  # a status a newer fpdiff wrote: the worst
        return max(s.rank for s in Status)


def _ops_matrix(r: dict) -> str:
    """Op family x (backend, precision), counts per status."""
    columns = list(dict.fromkeys((c["backend"], c["precision"]) for c in r["cells"]))
    head = "".join(f"<th>{_e(b)}<br>{_e(p)}</th>" for b, p in columns)
    rows = []
    for fam, by_backend in (r.get("matrix") or {}).items():
        tds = "".join(_ops_counts(by_backend.get(b, {}).get(p, {})) for b, p in columns)
        rows.append(f"<tr><th>{_e(fam)}</th>{tds}</tr>")
    return f"<h2>Matrix</h2><table><tr><th>family</th>{head}</tr>{''.join(rows)}</table>"


def _ops_failing(r: dict) -> str:
    """The failing cells, worst first, with their reasons and repros."""
    bad = [c for c in r["cells"] if c["status"] in FAILING]
    bad.sort(key=lambda c: (c["status"] != Status.MISMATCH, c["status"], c["catalog"], c["op"], c["case"]))
    rows = []
    for c in bad[:OPS_FAILING_ROWS]:
        repro = c.get("repro") or {}
        again = {True: "re-triggers", False: "does not re-trigger"}.get(repro.get("retriggers"), "not re-run")
        rows.append(f"<tr><td style='background:{_colour(c['status'])}'>{_e(c['status'])}</td><td>{_e(c['case'])}"
                    f"</td><td>{_e(c['backend'])}</td><td>{_e(c['precision'])}</td><td>{_e(c['shape_variant'])}</td>"
                    f"<td>{_e(c['variant'])}</td><td>{_e(_err((c.get('metrics') or {}).get('rel_l2')))}</td>"
                    f"<td>{_e(c['reason'])}</td><td>{_e(repro.get('path') or '')}"
                    f"{' (' + again + ')' if repro.get('path') else ''}</td></tr>")
    more = (f"<p class='muted'>... and {len(bad) - OPS_FAILING_ROWS} more in the JSON report</p>"
            if len(bad) > OPS_FAILING_ROWS else "")
    if not bad:
        return "<h2>Failing cells</h2><p class='muted'>None.</p>"
    return ("<h2>Failing cells</h2><table><tr><th>status</th><th>case</th><th>backend</th><th>precision</th>"
            "<th>shapes</th><th>variant</th><th>rel L2</th><th>reason</th><th>repro</th></tr>"
            f"{''.join(rows)}</table>{more}")


def _ops_extras(r: dict) -> str:
    """Skipped entries by reason, cases not started, the judge's disagreements with the catalog, the repro share."""
    out = []
    reasons: dict[str, int] = {}
    for s in r.get("skipped") or []:
        reasons[str(s.get("reason", ""))] = reasons.get(str(s.get("reason", "")), 0) + 1
    if reasons:
        rows = "".join(f"<tr><td>{n}</td><td>{_e(k)}</td></tr>"
                       for k, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        out.append(f"<h2>Skipped catalog entries</h2><table><tr><th>entries</th><th>reason</th></tr>{rows}</table>")
    if r.get("unrun"):
        out.append(f"<p><b>{_e(r['unrun'])} cases not started</b>: the time budget ran out.</p>")
    dis = r.get("judge_disagreements") or []
    if dis:
        rows = "".join(f"<tr><td>{_e(d.get('case'))}</td><td>{_e(d.get('op'))}</td><td>{_e(_err(d.get('rel_l2')))}"
                       f"</td><td>{_e(d.get('detail', ''))}</td></tr>" for d in dis)
        out.append("<h2>Catalog vs the float64 judge</h2><table><tr><th>case</th><th>op</th><th>rel L2</th>"
                   f"<th>detail</th></tr>{rows}</table>")
    rc = r.get("repro_check") or {}
    if rc.get("written"):
        out.append(f"<p>Repros re-trigger {_e(rc.get('retriggered', 0))} of {_e(rc['written'])} "
                   f"({(rc.get('retriggered') or 0) / rc['written']:.0%}); broken: {_e(rc.get('broken', 0))}.</p>")
    rows = "".join(f"<tr><td>{_e(b.get('signature'))}</td><td>{_e(b.get('cells'))}</td><td>{_e(b.get('path'))}</td>"
                   "</tr>" for b in r.get("reports") or [])
    if rows:
        out.append("<h2>Distinct bugs</h2><table><tr><th>signature</th><th>cells</th><th>report</th></tr>"
                   f"{rows}</table>")
    return "".join(out)


def ops_body(r: dict) -> str:
    summary = ", ".join(f"{n} {_e(s)}" for s, n in (r.get("summary") or {}).items() if n)
    out = [f"<p>{len(r['cells'])} cells judged against float64: {summary}.</p>",
           "<p class='legend'>" + "".join(f"<span style='background:{s.colour}'>{_e(s)}</span>" for s in CELL_STATUSES)
           + "</p>", _ops_matrix(r), _ops_failing(r), _ops_extras(r), _next(r)]
    return "".join(out) + _versions(r)


def fuzz_body(r: dict) -> str:
    """The campaign's numbers, discards by reason, and the findings table."""
    disc = r.get("discarded") or {}
    out = [f"<p>{_e(r.get('graphs'))} graphs tested on {_e(', '.join(r.get('backends') or []))} x "
           f"{_e(', '.join(r.get('precisions') or []))} (seed {_e(r.get('seed'))}, "
           f"{_e(r.get('graphs_per_minute'))} per minute): {_e(r.get('failing_graphs'))} failing, "
           f"{_e(disc.get('count', 0))} discarded, {len(r.get('findings') or [])} findings.</p>"]
    rows = "".join(f"<tr><td>{_e(n)}</td><td>{_e(k)}</td></tr>" for k, n in (disc.get("by_reason") or {}).items())
    if rows:
        out.append(f"<h2>Discarded graphs</h2><table><tr><th>graphs</th><th>why</th></tr>{rows}</table>")
    rows = []
    for f in r.get("findings") or []:
        rep, m = f.get("repro") or {}, f.get("minimization") or {}
        again = {True: "re-triggers", False: "does not re-trigger"}.get(rep.get("retriggers"), "not re-run")
        rows.append(f"<tr><td style='background:{_colour(f['status'])}'>{_e(f['status'])}</td>"
                    f"<td>{_e(f['backend'])}</td><td>{_e(f['precision'])}</td><td>{_e(' > '.join(f['ops']))}</td>"
                    f"<td>{_e(f['variant'])}</td><td>{_e(f.get('hit_count'))}</td>"
                    f"<td>{_e(m.get('ops_before'))} &rarr; {_e(m.get('ops_after'))} ({_e(m.get('probes'))} probes)</td>"
                    f"<td>{_e(f['reason'])}</td><td>{_e(rep.get('path') or '')}"
                    f"{' (' + again + ')' if rep.get('path') else ''}</td></tr>")
    out.append("<h2>Findings</h2>" + ("<table><tr><th>status</th><th>backend</th><th>precision</th><th>ops</th>"
                                      "<th>variant</th><th>hits</th><th>minimized</th><th>reason</th><th>repro</th>"
                                      f"</tr>{''.join(rows)}</table>" if rows else "<p class='muted'>None.</p>"))
    return "".join(out) + _next(r) + _versions(r)

