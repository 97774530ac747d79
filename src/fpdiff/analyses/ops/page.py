"""ops's result in the HTML report and a notebook: its own renderer, beside its declaration
(report/html.py holds what every analysis shares)."""
from __future__ import annotations

from fpdiff.core.status import CELL_STATUSES, FAILING, Status
from fpdiff.report import html as h  # the page's shared parts: escaping, colours, plots

OPS_FAILING_ROWS = 500  # failing cells the page lists; a sweep's JSON holds them all


def _ops_counts(by_status: dict) -> str:
    """A matrix cell: its counts per status, worst first, the cell coloured by the worst."""
    if not by_status:
        return "<td class='cell'>-</td>"
    order = sorted(by_status, key=lambda s: -_rank(s))
    text = "<br>".join(f"{by_status[s]} {h.esc(s)}" for s in order if by_status[s])
    return f"<td class='cell' style='background:{h.colour(order[0])}'>{text}</td>"


def _rank(status: str) -> int:
    try:
        return Status(status).rank
    except ValueError:  # a status a newer fpdiff wrote: the worst
        return max(s.rank for s in Status)


def _ops_matrix(r: dict) -> str:
    """Op family x (backend, precision), counts per status."""
    columns = list(dict.fromkeys((c["backend"], c["precision"]) for c in r["cells"]))
    head = "".join(f"<th>{h.esc(b)}<br>{h.esc(p)}</th>" for b, p in columns)
    rows = []
    for fam, by_backend in (r.get("matrix") or {}).items():
        tds = "".join(_ops_counts(by_backend.get(b, {}).get(p, {})) for b, p in columns)
        rows.append(f"<tr><th>{h.esc(fam)}</th>{tds}</tr>")
    return f"<h2>Matrix</h2><table><tr><th>family</th>{head}</tr>{''.join(rows)}</table>"


def _ops_failing(r: dict) -> str:
    """The failing cells, worst first, with their reasons and repros."""
    bad = [c for c in r["cells"] if c["status"] in FAILING]
    bad.sort(key=lambda c: (c["status"] != Status.MISMATCH, c["status"], c["catalog"], c["op"], c["case"]))
    rows = []
    for c in bad[:OPS_FAILING_ROWS]:
        repro = c.get("repro") or {}
        again = {True: "re-triggers", False: "does not re-trigger"}.get(repro.get("retriggers"), "not re-run")
        rows.append(f"<tr><td style='background:{h.colour(c['status'])}'>{h.esc(c['status'])}</td>"
                    f"<td>{h.esc(c['case'])}"
                    f"</td><td>{h.esc(c['backend'])}</td><td>{h.esc(c['precision'])}</td><td>{h.esc(c['shape_variant'])}</td>"
                    f"<td>{h.esc(c['variant'])}</td><td>{h.esc(h.err((c.get('metrics') or {}).get('rel_l2')))}</td>"
                    f"<td>{h.esc(c['reason'])}</td><td>{h.esc(repro.get('path') or '')}"
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
        rows = "".join(f"<tr><td>{n}</td><td>{h.esc(k)}</td></tr>"
                       for k, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        out.append(f"<h2>Skipped catalog entries</h2><table><tr><th>entries</th><th>reason</th></tr>{rows}</table>")
    if r.get("unrun"):
        out.append(f"<p><b>{h.esc(r['unrun'])} cases not started</b>: the time budget ran out.</p>")
    dis = r.get("judge_disagreements") or []
    if dis:
        rows = "".join(f"<tr><td>{h.esc(d.get('case'))}</td><td>{h.esc(d.get('op'))}</td>"
                       f"<td>{h.esc(h.err(d.get('rel_l2')))}"
                       f"</td><td>{h.esc(d.get('detail', ''))}</td></tr>" for d in dis)
        out.append("<h2>Catalog vs the float64 judge</h2><table><tr><th>case</th><th>op</th><th>rel L2</th>"
                   f"<th>detail</th></tr>{rows}</table>")
    rc = r.get("repro_check") or {}
    if rc.get("written"):
        out.append(f"<p>Repros re-trigger {h.esc(rc.get('retriggered', 0))} of {h.esc(rc['written'])} "
                   f"({(rc.get('retriggered') or 0) / rc['written']:.0%}); broken: {h.esc(rc.get('broken', 0))}.</p>")
    rows = "".join(f"<tr><td>{h.esc(b.get('signature'))}</td><td>{h.esc(b.get('cells'))}</td>"
                   f"<td>{h.esc(b.get('path'))}</td>"
                   "</tr>" for b in r.get("reports") or [])
    if rows:
        out.append("<h2>Distinct bugs</h2><table><tr><th>signature</th><th>cells</th><th>report</th></tr>"
                   f"{rows}</table>")
    return "".join(out)


def body(r: dict) -> str:
    summary = ", ".join(f"{n} {h.esc(s)}" for s, n in (r.get("summary") or {}).items() if n)
    out = [f"<p>{len(r['cells'])} cells judged against float64: {summary}.</p>",
           "<p class='legend'>" + "".join(f"<span style='background:{s.colour}'>{h.esc(s)}</span>"
                                          for s in CELL_STATUSES)
           + "</p>", _ops_matrix(r), _ops_failing(r), _ops_extras(r), h.next_list(r)]
    return "".join(out) + h.versions_line(r)
