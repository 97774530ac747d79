"""quant's result in the HTML report and a notebook: its own renderer, beside its declaration."""
from __future__ import annotations

from fpdiff.report import html as h


def body(r: dict) -> str:
    rows = []
    for c in r.get("cells") or []:
        m = c.get("metrics") or {}
        nums = "".join(f"<td>{h.esc('-' if m.get(k) is None else f'{m[k]:.3g}')}</td>"
                       for k in ("rel_l2", "quantization_loss", "departure", "departure_steps"))
        rows.append(f"<tr><td>{h.esc(c['backend'])}</td><td>{h.esc(c['precision'])}</td>"
                    f"<td style='background:{h.colour(c['status'])}'>{h.esc(c['status'])}</td>{nums}"
                    f"<td>{h.esc(c.get('reason', ''))}</td></tr>")
    table = ("<table><tr><th>backend</th><th>format</th><th>verdict</th><th>vs float64</th><th>loss</th>"
             "<th>departure</th><th>steps</th><th>why</th></tr>" + "".join(rows) + "</table>")
    found = [(f"{c['backend']} {c['precision']}", f) for c in r.get("cells") or [] for f in c.get("findings") or []]
    cal = r.get("calibration") or {}
    return (f"<h2>Quantized cells</h2>{table}<p>Calibrated on {h.esc(cal.get('how', ''))}; judged on "
            f"{h.esc(cal.get('judged_on', ''))}.</p><h2>Findings</h2>" + h.finding_list(found))
