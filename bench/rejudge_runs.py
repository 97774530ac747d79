"""Every stored check, ops and fuzz report under a folder judged again from its evidence (`fpdiff.rejudge`), each cell
compared with what the run itself said: a check's or sweep's cell by its status, reason, findings, revisions and
metrics, a campaign's graph by its cells' statuses and its outcome. The count of cells that come back the same is the
measure that the rules are pure functions of the kept evidence; any difference is printed.

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


def compare(path: Path) -> tuple[str | None, int, int, list[str]]:
    """(kind, cells, cells the same, what differed) for one report; a report without evidence counts nothing."""
    try:
        stored = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return None, 0, 0, []
    kind = stored.get("kind") if isinstance(stored, dict) else None
    if kind not in ("check", "ops", "fuzz") or not stored.get("evidence") and kind != "fuzz":
        return None, 0, 0, []
    if kind == "fuzz" and not any(r.get("evidence") for r in stored.get("records") or []):
        return None, 0, 0, []
    again = json.loads(json.dumps(fpdiff.rejudge(stored).as_dict(), default=str))
    if kind == "fuzz":
        pairs = [((r["id"], "graph"), r, s) for r, s in zip(stored["records"], again["records"])]
        fields = ("statuses", "outcome", "discard")
    else:
        pairs = [((c.get("case", ""), c["backend"], c["precision"], c["shape_variant"]), c, a)
                 for c, a in zip(stored["cells"], again["cells"])]
        fields = FIELDS + (("support",) if kind == "ops" else ())
    same, diffs = 0, []
    for where, a, b in pairs:
        off = [f for f in fields if a.get(f) != b.get(f)]
        same += not off
        diffs += [f"{path.name} {'/'.join(map(str, where))}: {f} {a.get(f)!r} -> {b.get(f)!r}"[:400] for f in off]
    return kind, len(pairs), same, diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    args = ap.parse_args()
    t0, runs, cells, same, diffs = time.perf_counter(), {}, 0, 0, []
    for d in args.dirs:
        for path in sorted(d.rglob("*.json")):
            kind, n, s, dd = compare(path)
            if kind is not None:
                runs[kind] = runs.get(kind, 0) + 1
            cells, same, diffs = cells + n, same + s, diffs + dd
    for line in diffs:
        print(line)
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(runs.items())) or "no"
    print(f"{kinds} reports, {cells} cells (a campaign's graphs counted as one each): {same} judged again the same, "
          f"{cells - same} differ ({time.perf_counter() - t0:.1f} s)")
    return int(same != cells)


if __name__ == "__main__":
    sys.exit(main())
