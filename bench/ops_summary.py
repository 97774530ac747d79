"""What an `fpdiff ops --json` sweep measured, as the tables BENCHMARKS.md keeps: per backend the cells, their
statuses, the cell-seconds they took and the cells per minute that makes (wall time of the sweep over its cells is
the whole-process rate, cell time per backend the backend's own share), the support states, the repro share and the
judge's disagreements with the catalog's expected outputs.

Run: .venv/bin/python bench/ops_summary.py SWEEP.json [SWEEP2.json ...] [--md]
"""
from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

FAILING = ("mismatch", "error", "crash", "timeout")


def summarize(data: dict) -> dict:
    """Per backend: cells, statuses, support states, seconds in its cells and cells per minute of its own time."""
    per: dict[str, dict] = defaultdict(lambda: {"cells": 0, "status": Counter(), "support": Counter(), "s": 0.0})
    for c in data["cells"]:
        row = per[c["backend"]]
        row["cells"] += 1
        row["status"][c["status"]] += 1
        row["support"][str(c.get("support"))] += 1
        row["s"] += float(c.get("duration_s") or 0.0)
    for row in per.values():
        row["cells_per_min"] = round(60 * row["cells"] / row["s"], 1) if row["s"] else None
    n = len(data["cells"])
    return {"cells": n, "cases": len({c["case"] for c in data["cells"]}), "duration_s": data.get("duration_s"),
            "cells_per_min_wall": round(60 * n / data["duration_s"], 1) if data.get("duration_s") else None,
            "skipped": len(data.get("skipped", [])), "unrun": data.get("unrun", 0),
            "repro_check": data.get("repro_check"), "judge_disagreements": data.get("judge_disagreements", []),
            "per_backend": {b: {**r, "status": dict(r["status"]), "support": dict(r["support"]), "s": round(r["s"], 1)}
                            for b, r in sorted(per.items())},
            "failing": [{k: c.get(k) for k in ("case", "backend", "precision", "status", "component", "reason")}
                        for c in data["cells"] if c["status"] in FAILING]}


def markdown(s: dict, name: str) -> str:
    """The summary as BENCHMARKS.md rows."""
    lines = [f"**{name}**: {s['cases']} cases, {s['cells']} cells in {s['duration_s']:.0f} s "
             f"({s['cells_per_min_wall']} cells/min whole-process), {s['skipped']} skipped, {s['unrun']} unrun; "
             f"repros {s['repro_check']}; judge disagreements {len(s['judge_disagreements'])}", "",
             "| backend | cells | pass | precision-loss | mismatch | error | crash | timeout | unsupported | other "
             "| cell time s | cells/min of its own time | native | other-dtype | not-implemented |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    named = ("pass", "precision-loss", "mismatch", "error", "crash", "timeout", "unsupported")
    for b, r in s["per_backend"].items():
        st, sp = r["status"], r["support"]
        other = sum(v for k, v in st.items() if k not in named)
        lines.append(f"| {b} | {r['cells']} | " + " | ".join(str(st.get(k, 0)) for k in named) +
                     f" | {other} | {r['s']} | {r['cells_per_min']} | {sp.get('native', 0)} | "
                     f"{sp.get('other-dtype', 0)} | {sp.get('not-implemented', 0)} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json", nargs="+")
    ap.add_argument("--md", action="store_true")
    args = ap.parse_args()
    for path in args.json:
        s = summarize(json.loads(Path(path).read_text()))
        print(markdown(s, path) if args.md else json.dumps(s, indent=1))


if __name__ == "__main__":
    main()
