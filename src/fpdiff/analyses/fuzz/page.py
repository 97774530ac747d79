"""fuzz's result in the HTML report and a notebook: its own renderer, beside its declaration
(report/html.py holds what every analysis shares)."""
from __future__ import annotations

from fpdiff.report import html as h  # the page's shared parts: escaping, colours, plots


def body(r: dict) -> str:
    """The campaign's numbers, discards by reason, and the findings table."""
    disc = r.get("discarded") or {}
    out = [f"<p>{h.esc(r.get('graphs'))} graphs tested on {h.esc(', '.join(r.get('backends') or []))} x "
           f"{h.esc(', '.join(r.get('precisions') or []))} (seed {h.esc(r.get('seed'))}, "
           f"{h.esc(r.get('graphs_per_minute'))} per minute): {h.esc(r.get('failing_graphs'))} failing, "
           f"{h.esc(disc.get('count', 0))} discarded, {len(r.get('findings') or [])} findings.</p>"]
    rows = "".join(f"<tr><td>{h.esc(n)}</td><td>{h.esc(k)}</td></tr>" for k, n in (disc.get("by_reason") or {}).items())
    if rows:
        out.append(f"<h2>Discarded graphs</h2><table><tr><th>graphs</th><th>why</th></tr>{rows}</table>")
    rows = []
    for f in r.get("findings") or []:
        rep, m = f.get("repro") or {}, f.get("minimization") or {}
        again = {True: "re-triggers", False: "does not re-trigger"}.get(rep.get("retriggers"), "not re-run")
        rows.append(f"<tr><td style='background:{h.colour(f['status'])}'>{h.esc(f['status'])}</td>"
                    f"<td>{h.esc(f['backend'])}</td><td>{h.esc(f['precision'])}</td>"
                    f"<td>{h.esc(' > '.join(f['ops']))}</td>"
                    f"<td>{h.esc(f['variant'])}</td><td>{h.esc(f.get('hit_count'))}</td>"
                    f"<td>{h.esc(m.get('ops_before'))} &rarr; {h.esc(m.get('ops_after'))} "
                    f"({h.esc(m.get('probes'))} probes)</td>"
                    f"<td>{h.esc(f['reason'])}</td><td>{h.esc(rep.get('path') or '')}"
                    f"{' (' + again + ')' if rep.get('path') else ''}</td></tr>")
    out.append("<h2>Findings</h2>" + ("<table><tr><th>status</th><th>backend</th><th>precision</th><th>ops</th>"
                                      "<th>variant</th><th>hits</th><th>minimized</th><th>reason</th><th>repro</th>"
                                      f"</tr>{''.join(rows)}</table>" if rows else "<p class='muted'>None.</p>"))
    return "".join(out) + h.next_list(r) + h.versions_line(r)
