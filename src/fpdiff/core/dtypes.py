"""The dtype-changed rule, once: a backend reports what it ran (its float ops counted by dtype, the count of the graph
it was handed, the dtypes it returned); this decides whether that cell still measures the precision asked for."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from fpdiff.core.compare import Finding

# A cell is dtype-changed when fewer than a quarter of its float arithmetic ops ran in the requested dtype. Many wide
# ops are normal in an fp16 model: torch computes norm statistics and softmax sums in fp32 and compilers follow (IREE
# ran 16 of 35 ops of tinycnn's fp16 dispatches in fp16, the rest are group/batch norm statistics); below a quarter
# the cell no longer measures the precision asked for (ORT's CPU provider: 0 of 7).
MOSTLY = 0.25

DTYPE_CHANGED = "dtype-changed"  # the finding's kind
OpCounts = Mapping[str, int]  # float arithmetic ops by the dtype they computed in: {"float16": 12, "float32": 3}


def too_wide(counts: OpCounts, want: str, planned: OpCounts | None = None) -> bool:
    """The share rule on counted float ops (see MOSTLY). `planned`: the same count on the graph the backend was
    handed, when that graph itself mixes dtypes (an autocast graph keeps ops in float32 on purpose): the rule then
    wants a quarter of the share it asked for, not a quarter of all ops."""
    total = sum(counts.values())
    planned_total = sum(planned.values()) if planned else 0
    asked = planned.get(want, 0) / planned_total if planned and planned_total else 1.0
    return bool(total) and counts.get(want, 0) < MOSTLY * asked * total


def mixed_dtype(counts: OpCounts, want: str) -> str | None:
    """What a cell computed in, from counted float ops: the requested dtype with its share when others ran too."""
    total = sum(counts.values())
    if not total:
        return None
    if counts.get(want, 0) == total:
        return want
    if len([n for n in counts.values() if n]) == 1:  # all of it in one other dtype: that is what it computed in
        return next(k for k, n in counts.items() if n)
    others = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if k != want)
    return f"{want} ({counts.get(want, 0)} of {total} float ops; {others})"


def dtype_changed(backend: str, want: str, op_dtypes: OpCounts | None = None, planned: OpCounts | None = None,
                  returned: Sequence[str] = (), remedy: str | None = None) -> Finding | None:
    """The finding for a cell that did not compute in `want`: most of its counted float ops ran in other dtypes
    (too_wide), or it returned float outputs of another dtype (`returned`: pass them only where every output must
    be `want`, a whole-model cast whose backend does not record computing in `want`). `remedy`: the backend's own
    way to get `want` (its flags, another provider), else a generic one."""
    if op_dtypes and too_wide(op_dtypes, want, planned):
        ran, total = op_dtypes.get(want, 0), sum(op_dtypes.values())
        asked = f" (the graph it was handed asks for {planned.get(want, 0)} of {sum(planned.values())})" \
            if planned else ""
        others = ", ".join(f"{n} in {k}" for k, n in sorted(op_dtypes.items()) if k != want and n)
        return Finding(DTYPE_CHANGED, f"{backend} ran {ran} of {total} float ops in {want}{asked}; {others}",
                       remedy=remedy or f"judge this cell as mostly wider than {want}")
    got = sorted({d for d in returned if "float" in d and d != want})
    if got:
        return Finding(DTYPE_CHANGED, f"asked for {want}, {backend} returned {', '.join(got)}",
                       remedy=remedy or f"check the backend's precision flags; this cell is not a real {want} run")
    return None
