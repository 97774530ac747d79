"""Locate's per-op errors as Google Model Explorer node data, so a user sees on their own graph where the error
starts: one file of local error (against each op's floor) and one of accumulated error, colored by thresholds."""
from __future__ import annotations

import json
import math
from pathlib import Path

BIG = 1e9  # JSON has no inf: an op whose error is unbounded (overflow) shows as this
GREEN, YELLOW, RED = "#c8e6c9", "#fff59d", "#ef9a9a"


def _finite(x: float | None) -> float:
    if x is None:
        return 0.0
    return x if math.isfinite(x) else BIG


def graph_node_data(results: dict[str, float], thresholds: list[tuple[float, str]], name: str) -> dict:
    """Model Explorer's GraphNodeData: values by node key, colors by upper-bound thresholds (first that holds)."""
    return {"name": name, "results": {k: {"value": _finite(v)} for k, v in results.items()},
            "thresholds": [{"value": v, "bgColor": c} for v, c in thresholds]}


def node_data(result, local_factor: float, unit_roundoff: float, tolerance: float) -> tuple[dict, dict]:
    """(local, accumulated) node data of a LocateResult: torch ops by their exported node names, or ONNX tensors
    (mark-all) by their names. Local: error over the op's floor (green within it, yellow up to the culprit factor,
    red beyond: where the error starts). Accumulated: rel L2 against float64 (green within a few unit roundoffs,
    yellow within the precision's tolerance, red beyond)."""
    local, accumulated = {}, {}
    if result.mark_all is not None:
        for row in result.mark_all.rows:
            base = row.baseline_rel_l2
            local[row.tensor] = row.rel_l2 / base if base else (0.0 if row.rel_l2 == 0 else math.inf)
            accumulated[row.tensor] = row.rel_l2
    for op in result.ops:
        local[op.node] = op.ratio if op.local is not None else 0.0
        accumulated[op.node] = op.accumulated
    local_t = [(1.0, GREEN), (local_factor, YELLOW), (BIG, RED)]
    acc_t = [(local_factor * unit_roundoff, GREEN), (tolerance, YELLOW), (BIG, RED)]
    label = f"{result.backend} {result.precision}"
    return (graph_node_data(local, local_t, f"fpdiff local error / floor ({label})"),
            graph_node_data(accumulated, acc_t, f"fpdiff accumulated rel L2 ({label})"))


def write(result, path: str | Path, local_factor: float, unit_roundoff: float, tolerance: float) -> list[Path]:
    """PATH holds the local error, PATH's sibling `*.accumulated.json` the accumulated one."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    local, accumulated = node_data(result, local_factor, unit_roundoff, tolerance)
    acc_path = p.with_name(p.stem + ".accumulated" + (p.suffix or ".json"))
    p.write_text(json.dumps(local, indent=1))
    acc_path.write_text(json.dumps(accumulated, indent=1))
    return [p, acc_path]
