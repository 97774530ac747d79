"""Support in the runtime's own word, per cell: native (a kernel at the dtype asked), other-dtype (the runtime computed
the op in another dtype: casts inserted, a hint replaced) or not-implemented (it refused). Read from what the cell
already holds: its status, its findings and the runtime's typed record of what it ran (core/support.py, made by
backends/ort.py, openvino.py, iree.py); and the support table `fpdiff ops --save TABLE` keeps of a stack."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fpdiff.core.compare import Finding
from fpdiff.core.status import Status
from fpdiff.core.support import NATIVE, NOT_IMPLEMENTED, OTHER_DTYPE, STATES, Support

# Findings that say the cell computed in another dtype than asked: the dtype-changed rule on what the backend counted
# (core/dtypes.py), OpenVINO replacing its inference precision hint, and a mismatch whose error matches a narrower
# format's baseline (judging/cells.py).
OTHER_DTYPE_FINDINGS = ("dtype-changed", "hint-replaced", "coarser-than-requested")
# Statuses of a cell whose runtime ran the op to the end: it did not refuse, so without a word of another dtype it
# computed at the dtype asked (torch eager and inductor either run a kernel at the dtype or refuse).
RAN = frozenset(s.value for s in (Status.PASS, Status.PRECISION_LOSS, Status.MISMATCH, Status.UNJUDGED,
                                  Status.ILL_CONDITIONED))
# How telling a state is, least to most: a runtime that lacks something for an op says more than one that has it
RANK = {None: 0, NATIVE: 1, OTHER_DTYPE: 2, NOT_IMPLEMENTED: 3}
# Refusals that are about the machine, not the runtime's kernels: fpdiff could not ask the runtime (runtime/worker.py)
_NOT_ASKED = (" is not available: ", "no CUDA device on this machine")
DETAIL_CHARS = 300  # the detail is one line of a table: the runtime's words, cut


def support_state(status: str, findings: list, support: Support | None, precision: str,
                  reason: str = "") -> tuple[str | None, str]:
    """(state, detail in the runtime's words) of one judged cell; (None, "") when the runtime said nothing (a crash or
    an exporter failure before it was reached). `reason`: the cell's reason, which holds a refusal's own message."""
    if str(status) == Status.UNSUPPORTED.value:  # a declared refusal: the runtime has no implementation at this dtype
        if any(words in reason for words in _NOT_ASKED):
            return None, ""
        said = reason or next((_message(f) for f in findings if _kind(f) == Status.UNSUPPORTED), "")
        return NOT_IMPLEMENTED, _cut(said or f"refused at {precision}")
    recorded = recorded_state(support)
    if recorded[0] in (OTHER_DTYPE, NOT_IMPLEMENTED):  # the runtime's own record of an op it did not run as asked
        return recorded
    other = next((f for f in findings if _kind(f) in OTHER_DTYPE_FINDINGS), None)
    if other is not None:  # the cell's record of what ran overrides a per-op record that found nothing wrong
        return OTHER_DTYPE, _cut(f"{_kind(other)}: {_message(other)}")
    if recorded[0] is not None:
        return recorded
    if str(status) in RAN:
        return NATIVE, f"ran at {precision} with no cast or replaced precision recorded"
    return None, ""


def recorded_state(support: Support | None) -> tuple[str | None, str]:
    """The most telling state a backend recorded over its ops (and its whole graph), with its words; the op's own
    graph may hold several op types (an export's helpers), and the least supported one says what the cell computed."""
    entries = [e for _, e in (support.entries() if support is not None else []) if e.get("state") in STATES]
    if not entries:
        return None, ""
    top = max(entries, key=lambda e: RANK[e["state"]])
    runtime = support.runtime
    return top["state"], _cut(f"{runtime}: {top.get('said', '')}" if runtime else top.get("said", ""))


def support_table(cells: Iterable[Any]) -> list[dict]:
    """One row per (catalog, op, backend, precision), the most telling state of its cells (a variant the runtime
    refuses is a gap of that op at that dtype even when the plain sample runs), sorted; cells are OpsCells or their
    as_dict() form."""
    rows: dict[tuple, dict] = {}
    for cell in cells:
        get = cell.get if isinstance(cell, dict) else lambda k, c=cell: getattr(c, k, None)
        key = (get("catalog"), get("op"), get("backend"), get("precision"))
        row = {"catalog": key[0], "op": key[1], "backend": key[2], "precision": key[3],
               "support": get("support"), "detail": get("support_detail") or ""}
        if row["support"] not in RANK:
            row["support"] = None
        if key not in rows or RANK[row["support"]] > RANK[rows[key]["support"]]:
            rows[key] = row
    return [rows[k] for k in sorted(rows, key=lambda k: tuple(str(x) for x in k))]


def _kind(f: Any) -> str:
    return f.kind if isinstance(f, Finding) else (f.get("kind") if isinstance(f, dict) else "")


def _message(f: Any) -> str:
    return f.message if isinstance(f, Finding) else (f.get("message", "") if isinstance(f, dict) else "")


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 3] + "..."
