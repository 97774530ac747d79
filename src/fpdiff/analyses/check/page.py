"""check's result in the HTML report and a notebook: its own renderer, beside its declaration
(report/html.py holds what every analysis shares)."""
from __future__ import annotations

import math

from fpdiff.core.status import CELL_STATUSES
from fpdiff.report import html as h  # the page's shared parts: escaping, colours, plots


def body(r: dict) -> str:
    cells = r["cells"]
    precisions = list(dict.fromkeys(c["precision"] for c in cells))
    judge = r.get("judge") or {}
    ref = r.get("reference") or {}
    out = [f"<p>Relative L2 against float64 ({h.esc(ref.get('backend'))} on {h.esc(ref.get('device'))}); judge "
           f"cross-check: <b>{h.esc(judge.get('status', 'n/a'))}</b>. {h.esc(judge.get('message', ''))}</p>",
           "<p class='legend'>" + "".join(f"<span style='background:{s.colour}'>{h.esc(s)}</span>"
                                          for s in CELL_STATUSES)
           + " hover a cell for its reason, findings and the rules that made its verdict</p>"]
    for variant in dict.fromkeys(c["shape_variant"] for c in cells):
        rows = {}
        for c in cells:
            if c["shape_variant"] == variant:
                rows.setdefault((c["backend"], c["device"]), {})[c["precision"]] = c
        head = "".join(f"<th>{h.esc(p)}</th>" for p in precisions)
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
                tds.append(f"<td class='cell' style='background:{h.colour(c['status'])}' title='{h.esc(tip)}'>"
                           f"<b>{h.esc(c['status'])}</b><br>{h.esc(h.err(err))}"
                           + (f"<br><span class='muted'>{h.esc(kinds)}</span>" if kinds else "") + "</td>")
            lines.append(f"<tr><th>{h.esc(b)} ({h.esc(d)})</th>{''.join(tds)}</tr>")
        out.append(f"<h2>Grid, shapes: {h.esc(variant)}</h2><table><tr><th>backend</th>{head}</tr>{''.join(lines)}"
                   "</table>")
    if any(c.get("metrics") for c in cells):
        out.append(h.plotted("Errors", _error_bars, cells, precisions))
    found = [(f"{c['backend']}/{c['device']}/{c['precision']}/{c['shape_variant']}", f) for c in cells
             for f in c.get("findings", [])]
    out.append("<h2>Findings</h2>" + h.finding_list(found))
    out.append(h.next_list(r))
    return "".join(out) + h.versions_line(r)


def _provenance(revisions: list[dict]) -> str:
    """How the verdict was reached: each rule that changed it, from what, to what, and why."""
    if not revisions:
        return ""
    return "\n\nverdict by rule:" + "".join(f"\n{v['rule']}: {v['from']} -> {v['to']} ({v['why']})"
                                          for v in revisions)


def _error_bars(cells: list[dict], precisions: list[str]) -> str:
    """Each backend's error per precision, log scale, next to the tolerance: the grid as a picture."""
    static = [c for c in cells if c["shape_variant"] == cells[0]["shape_variant"] and (c.get("metrics") or {})]
    if not static:
        return ""
    backends = list(dict.fromkeys(c["backend"] for c in static))
    fig, ax = h.figure(11, 3.6)
    width = 0.8 / max(1, len(backends))
    for i, b in enumerate(backends):
        xs, ys, cs = [], [], []
        for j, p in enumerate(precisions):
            c = next((c for c in static if c["backend"] == b and c["precision"] == p), None)
            err = (c.get("metrics") or {}).get("rel_l2") if c else None
            if isinstance(err, (int, float)) and math.isfinite(err) and err > 0:
                xs.append(j + i * width)
                ys.append(err)
                cs.append(h.colour(c["status"]))
        ax.bar(xs, ys, width=width, color=cs, edgecolor="#333", label=b)
        for x, y in zip(xs, ys):
            ax.text(x, y, b, rotation=90, fontsize=7, ha="center", va="bottom")
    ax.set_yscale("log")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(precisions))], precisions)
    ax.set_ylabel("rel L2 vs float64")
    ax.set_title("error per backend and precision (bar color = verdict)")
    return h.svg(fig)
