"""locate's result in the HTML report and a notebook: its own renderer, beside its declaration
(report/html.py holds what every analysis shares)."""
from __future__ import annotations

import math

from fpdiff.analyses.locate.text import kernel_cell
from fpdiff.report import html as h  # the page's shared parts: escaping, colours, plots


def body(r: dict) -> str:
    ops = r.get("ops") or []
    culprit = r.get("culprit") or {}
    out = [f"<p>Backend <b>{h.esc(r['backend'])}</b> at <b>{h.esc(r['precision'])}</b>; output error "
           f"{h.esc(h.err(r.get('output_error')))}.</p>"]
    if culprit:
        out.append(f"<p><b>Culprit</b>: {h.esc(culprit.get('op'))} (node {h.esc(culprit.get('node'))}, module "
                   f"{h.esc(culprit.get('module') or '(root)')}, {h.esc(culprit.get('source'))}): "
                   f"{h.esc(culprit.get('cause'))}"
                   f", found by {h.esc(culprit.get('found_by'))}.</p>")
    else:
        out.append("<p>No culprit: every op stays within what the precision must lose.</p>")
    if ops:
        out.append(h.plotted("Error profile", _profile, ops))
        rows = "".join(f"<tr><td>{o['index']}</td><td>{h.esc(o['op'])}</td><td>{h.esc(o['node'])}</td>"
                       f"<td>{h.esc(o.get('module') or o.get('stack') or '(root)')}</td><td>{h.esc(o['source'])}</td>"
                       f"<td>{h.err(o.get('accumulated'))}</td><td>{h.err(o.get('local'))}</td>"
                       f"<td>{h.err(o.get('floor'))}</td></tr>" for o in ops)
        out.append("<h2>Ops</h2><table><tr><th>#</th><th>op</th><th>node</th><th>module</th><th>source</th>"
                   f"<th>accumulated</th><th>local</th><th>floor</th></tr>{rows}</table>")
    if r.get("quantized"):
        out.append(_quantized(r["quantized"]))
    out.append("<h2>Findings</h2>" + h.finding_list([(r["backend"], f) for f in r.get("findings") or []]))
    return "".join(out)


def _profile(ops: list[dict]) -> str:
    """Accumulated, local and floor error along the graph, log scale, the culprit marked."""
    fig, ax = h.figure(12, 4.2)
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
    return h.op_axis(fig, ax, ops, "error profile along the graph")


def _quantized(q: dict) -> str:
    """A quantized cell's layers: where the format costs (against float64) and where the backend departs (steps)."""
    head = (f"<p>Quantized cell: <b>{h.esc(q.get('status'))}</b>: {h.esc(q.get('reason'))}</p>"
            f"<p>Scheme: {h.esc(q.get('scheme'))}; quantized by {h.esc(q.get('quantized_by'))}.</p>")
    rows = "".join(f"<tr><td>{h.esc(x['tensor'])}</td><td>{h.esc(' + '.join(o.split(' ')[0] for o in x['ops']))}</td>"
                   f"<td>{h.err(x.get('drift'))}</td><td>{h.err(x.get('added'))}</td><td>{h.err(x.get('recovers'))}"
                   f"</td><td>{x.get('clipped')}</td><td>{x.get('levels')}</td><td>{kernel_cell(x, h.err)}</td></tr>"
                   for x in q.get("layers") or [])
    return (head + "<h2>Quantized layers</h2><table><tr><th>tensor</th><th>ops</th><th>drift</th><th>added</th>"
            f"<th>recovers</th><th>clipped</th><th>levels</th><th>steps</th></tr>{rows}</table>")
