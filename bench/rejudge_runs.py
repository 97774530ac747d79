"""Every stored check report under a folder judged again from its evidence (`fpdiff.rejudge`), each cell compared
with what the run itself said: its status, reason, findings, revisions and metrics. The count of cells that come
back the same is the measure that the rules are pure functions of the kept evidence; any difference is printed.

    python bench/rejudge_runs.py DIR [DIR ...]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import fpdiff

FIELDS = ("status", "reason", "findings", "revisions", "metrics", "baseline_metrics", "effective_bits")


def compare(path: Path) -> tuple[int, int, list[str]]:
    """(cells, cells the same, what differed) for one report; a report that is not a check's counts nothing."""
    stored = json.loads(path.read_text())
    if stored.get("kind") != "check" or "evidence" not in stored:
        return 0, 0, []
    again = json.loads(json.dumps(fpdiff.rejudge(stored).as_dict(), default=str))
    same, diffs = 0, []
    for a, b in zip(stored["cells"], again["cells"]):
        off = [f for f in FIELDS if a.get(f) != b.get(f)]
        same += not off
        diffs += [f"{path.name} {a['backend']}/{a['precision']}/{a['shape_variant']}: {f} {a.get(f)!r} -> "
                  f"{b.get(f)!r}"[:400] for f in off]
    return len(stored["cells"]), same, diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    args = ap.parse_args()
    t0, runs, cells, same, diffs = time.perf_counter(), 0, 0, 0, []
    for d in args.dirs:
        for path in sorted(d.rglob("*.json")):
            n, s, dd = compare(path)
            runs += n > 0
            cells, same, diffs = cells + n, same + s, diffs + dd
    for line in diffs:
        print(line)
    print(f"{runs} check reports, {cells} cells: {same} judged again the same, {cells - same} differ "
          f"({time.perf_counter() - t0:.1f} s)")
    return int(same != cells)


if __name__ == "__main__":
    sys.exit(main())
