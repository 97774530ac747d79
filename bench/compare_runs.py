"""Two folders of reports (bench/corpus.py --work, the same runs before and after a change) compared report by
report: every verdict, finding, culprit and number the reports carry, numbers to the three significant digits a
report shows. Times, paths, versions and the provenance a newer fpdiff adds (revisions, evidence, and any key the
before report did not have) are left out. Reports are matched by their path under each folder.

    python bench/compare_runs.py BEFORE_DIR AFTER_DIR
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

# keys whose values change from run to run, that name the tree a run came from (a corpus record's `command`), or
# that only a newer fpdiff writes
SKIP = {"command", "duration_s", "seconds", "wall_s", "prepare_s", "run_s", "run_times", "versions", "fpdiff_version",
        "evidence", "revisions", "rejudged", "info", "log_tail", "traceback", "repro", "model", "path", "next",
        "speed", "compiles", "cache", "timings", "elapsed_s", "t_s", "graphs_per_minute"}


def same_number(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or f"{a:.2e}" == f"{b:.2e}"


def differences(a: object, b: object, where: str = "") -> list[str]:
    """Where two JSON values differ, as 'path: before -> after'."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(a):  # a key only the after report has is what a newer fpdiff adds
            if k in SKIP:
                continue
            out += differences(a.get(k), b.get(k), f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items -> {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        return [] if same_number(float(a), float(b)) else [f"{where}: {a!r} -> {b!r}"]
    if isinstance(a, str) and isinstance(b, str):
        a, b = _scratch(a), _scratch(b)
    return [] if a == b else [f"{where}: {str(a)[:200]!r} -> {str(b)[:200]!r}"]


def _scratch(text: str) -> str:
    """A message with the run's scratch folders (a compiler names its temp file) read as one name."""
    return re.sub(r"/tmp/[^/\s:'\"]+", "/tmp/SCRATCH", text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args()
    names = sorted({str(p.relative_to(d)) for d in (args.before, args.after) for p in d.rglob("*.json")})
    same = compared = 0
    for name in names:
        a, b = args.before / name, args.after / name
        if not (a.exists() and b.exists()):
            print(f"{name}: only {'before' if a.exists() else 'after'}")
            continue
        compared += 1
        diff = differences(json.loads(a.read_text()), json.loads(b.read_text()))
        same += not diff
        for d in diff[:20]:
            print(f"{name}{d}")
    print(f"{len(names)} reports, {compared} in both: {same} the same, {compared - same} differ")
    return int(same != len(names))


if __name__ == "__main__":
    sys.exit(main())
