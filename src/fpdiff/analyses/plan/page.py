"""plan's result in the HTML report and a notebook: its own renderer, beside its declaration
(report/html.py holds what every analysis shares)."""
from __future__ import annotations

import math

from fpdiff.core.status import Status
from fpdiff.report import html as h  # the page's shared parts: escaping, colours, plots


def body(r: dict) -> str:
    out = [f"<p>{h.esc(r['precision'])} on {h.esc(r['backend'])}, tolerance {h.esc(r['tolerance'])}: "
           f"<b>{'verified plan' if r.get('passed') else 'no plan'}</b>. Pure {h.esc(r['precision'])}: "
           f"{h.esc(h.err(r.get('pure_error')))}; with the plan: {h.esc(h.err(r.get('error')))}; "
           f"{(r.get('low_fraction') or 0):.1%} of the flops stay {h.esc(r['precision'])}.</p>"]
    rows = "".join(f"<tr><td>{h.esc(k['node'])}</td><td>{h.esc(k['op'])}</td>"
                   f"<td>{h.esc(k.get('module') or '(root)')}</td>"
                   f"<td>{h.esc(k.get('source'))}</td><td>{h.esc('; '.join(k.get('why') or []))}</td></tr>"
                   for k in r.get("keep") or [])
    out.append("<h2>Ops kept in fp32</h2><table><tr><th>node</th><th>op</th><th>module</th><th>source</th>"
               f"<th>why</th></tr>{rows}</table>")
    errs = [("pure " + r["precision"], r.get("pure_error")), ("plan", r.get("error")),
            ("all fp32", r.get("fp32_error"))]
    errs = [(k, v) for k, v in errs if isinstance(v, (int, float)) and math.isfinite(v) and v > 0]
    if errs:
        out.append(h.plotted("Error", _plan_errors, errs, r["tolerance"]))
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
        runs = "<br>".join(f"{h.esc(x['backend'])} at {h.esc(x.get('precision'))}: "
                           + (f"{h.esc(h.err(x['error']))} {'&le;' if x.get('passed') else '&gt;'} {h.esc(tolerance)}"
                              if x.get("error") is not None else h.esc(x.get("reason") or "did not run"))
                           + (f" (ran {h.esc(_counts(x.get('op_dtypes')))})" if x.get("op_dtypes") else "")
                           for x in e.get("runs") or [])
        why = "; ".join(h.esc(t) for t in (e.get("check"), e.get("reason")) if t)
        colour = h.colour(Status.PASS if e.get("verified") else Status.MISMATCH)
        rows.append(f"<tr><td>{h.esc(e['target'])}</td><td>{h.esc(e['path'])}</td>"
                    f"<td style='background:{colour}'>{state}</td><td>{runs}</td>"
                    f"<td>{h.esc(_counts(e.get('op_dtypes')))}</td><td>{why}</td></tr>")
    return ("<h2>Exports</h2><table><tr><th>target</th><th>file</th><th>state</th><th>verified where (error vs "
            "tolerance)</th><th>ops read back</th><th>check, reason</th></tr>" + "".join(rows) + "</table>")


def _plan_errors(errs: list[tuple[str, float]], tolerance: float) -> str:
    """Pure precision, the plan and all-fp32 against the tolerance."""
    fig, ax = h.figure(6, 3)
    ax.bar([k for k, _ in errs], [v for _, v in errs], color=["#ef9a9a", "#c8e6c9", "#90caf9"][:len(errs)])
    ax.axhline(tolerance, color="#333", linestyle="--", label="tolerance")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("error before and after the plan")
    return h.svg(fig)
