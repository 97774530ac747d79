"""ranges's result in the HTML report and a notebook: its own renderer, beside its declaration
(report/html.py holds what every analysis shares)."""
from __future__ import annotations

from fpdiff.report import html as h  # the page's shared parts: escaping, colours, plots


def body(r: dict) -> str:
    ops = r["ops"]
    out = []
    if ops:
        out.append(h.plotted("Ranges", _magnitudes, ops))
    risky = [(f"{o['op']} ({o['source']})", {"kind": ", ".join(d["risks"]), "message": f"at {name}" + (
              ": " + "; ".join(d["notes"]) if d.get("notes") else "")})
             for o in ops for name, d in o["dtypes"].items() if d.get("risks")]
    out.append("<h2>Risks</h2>" + h.finding_list(risky))
    return "".join(out)


def _magnitudes(ops: list[dict]) -> str:
    """Each op's largest and smallest nonzero magnitude against fp16's limits."""
    fig, ax = h.figure(12, 4.2)
    idx = list(range(len(ops)))
    ax.plot(idx, [o["max_abs"] or None for o in ops], "^", label="max |x|")
    ax.plot(idx, [o["min_abs"] if o.get("min_abs") else None for o in ops], "v", label="smallest nonzero |x|")
    for (label, v), color in zip(LIMITS.items(), ("#c62828", "#ef6c00", "#6a1b9a")):
        ax.axhline(v, color=color, linestyle="--", linewidth=1, label=label)
    return h.op_axis(fig, ax, ops, "per-op magnitudes against fp16's limits (bf16 has fp32's range)")


LIMITS = {"fp16 max (65504)": 65504.0, "fp16 smallest normal (6.1e-5)": 6.103515625e-05,
          "fp16 smallest subnormal (6e-8)": 5.960464477539063e-08}
