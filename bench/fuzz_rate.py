"""Fuzz campaign rates on this machine, one backend at a time: graphs tested per minute with the float64 oracle
(whole process: the CLI's wall time, start-up included), what was discarded and why, the findings, and what their
minimization cost. Each campaign is the CLI as a user runs it, with --json; this script only reads the JSON.

    python bench/fuzz_rate.py --backends ort,inductor --precisions fp32 --time 3m --seed 0 [--md out.md]
    python bench/fuzz_rate.py --from-json fuzz.json   # summarize a campaign already run
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def campaign(backend: str, precisions: str, budget: str, seed: int, work: Path, extra: list[str]) -> dict:
    """One CLI campaign on one backend; its JSON with the whole-process wall time added."""
    out = work / f"{backend}.json"
    cmd = [sys.executable, "-m", "fpdiff", "fuzz", "--backends", backend, "--precisions", precisions, "--time",
           budget, "--seed", str(seed), "--json", str(out), "--repro-dir", str(work / f"repro-{backend}"), *extra]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if not out.exists():
        return {"backend": backend, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    d = json.loads(out.read_text())
    d["wall_s"] = wall
    d["command"] = " ".join(["fpdiff", *cmd[3:]])
    return d


def row(d: dict) -> dict:
    """The figures of one campaign."""
    if "error" in d:
        return {"backend": d["backend"], "error": d["error"]}
    mins = [f["minimization"]["seconds"] for f in d["findings"] if f["minimization"]["probes"]]
    cells = sum(len(r.get("statuses") or {}) for r in d["records"])
    wall = d.get("wall_s") or d["duration_s"]
    return {"backend": ",".join(d["backends"]), "precisions": ",".join(d["precisions"]),
            "generated": d["generated"], "tested": d["graphs"], "cells": cells,
            "graphs_per_min": 60.0 * d["graphs"] / wall, "cells_per_s": cells / wall,
            "discarded": d["discarded"]["by_reason"], "failing": d["failing_graphs"],
            "findings": len(d["findings"]),
            "ops_after": [len(f["ops"]) for f in d["findings"]],
            "minimize_s_median": statistics.median(mins) if mins else None,
            "probes": [f["minimization"]["probes"] for f in d["findings"]],
            "findings_per_cpu_h": len(d["findings"]) / (wall * cpu_count() / 3600.0), "wall_s": wall}


def cpu_count() -> int:
    import os
    return os.cpu_count() or 1


def markdown(rows: list[dict]) -> str:
    head = ("| backend | precisions | graphs tested | graphs/min | cells/s (a cell: one graph at one precision) | "
            "discarded | findings | ops after minimizing | minimize s (median) |\n"
            "|---|---|---|---|---|---|---|---|---|\n")
    body = ""
    for r in rows:
        if "error" in r:
            body += f"| {r['backend']} | error: {r['error']} |\n"
            continue
        disc = ", ".join(f"{n} {k}" for k, n in r["discarded"].items()) or "0"
        med = f"{r['minimize_s_median']:.0f}" if r["minimize_s_median"] is not None else "-"
        body += (f"| {r['backend']} | {r['precisions']} | {r['tested']} | {r['graphs_per_min']:.1f} | "
                 f"{r['cells_per_s']:.2f} | {disc} | {r['findings']} | "
                 f"{r['ops_after'] or '-'} | {med} |\n")
    return head + body


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="ort")
    ap.add_argument("--precisions", default="fp32")
    ap.add_argument("--time", default="3m")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from-json", nargs="*", default=None)
    ap.add_argument("--md")
    ap.add_argument("--keep", help="keep each campaign's JSON and repros here")
    args, extra = ap.parse_known_args()
    if args.from_json:
        rows = [row(json.loads(Path(p).read_text())) for p in args.from_json]
    else:
        work = Path(args.keep or tempfile.mkdtemp(prefix="fuzz-rate-"))
        work.mkdir(parents=True, exist_ok=True)
        rows = [row(campaign(b, args.precisions, args.time, args.seed, work, extra))
                for b in args.backends.split(",")]
    text = markdown(rows)
    print(text)
    print(json.dumps(rows, indent=1, default=str))
    if args.md:
        Path(args.md).write_text(text)


if __name__ == "__main__":
    main()
