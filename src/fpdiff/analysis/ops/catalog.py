"""The catalogs together: which cases a sweep's --catalog and --ops select, and the closest op names when a
pattern selects nothing."""
from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

from fpdiff.analysis.ops.case import CATALOGS, ONNX_CATALOG, TORCH_CATALOG, Case, matches
from fpdiff.core.errors import UsageError

SUGGESTIONS = 5  # closest op names listed for a pattern that selects none: enough to spot a typo, one line


def _module(catalog: str):
    if catalog == TORCH_CATALOG:
        from fpdiff.analysis.ops import torch_catalog as mod
    elif catalog == ONNX_CATALOG:
        from fpdiff.analysis.ops import onnx_catalog as mod
    else:
        raise UsageError(f"unknown catalog {catalog!r}; the catalogs: {', '.join(CATALOGS)}")
    return mod


def op_names(catalog: str) -> list[str]:
    """Every op name of a catalog, sorted (computed once per process)."""
    return list(_module(catalog).op_names())


def select(catalogs: list[str], patterns: list[str] | None, samples: int | None = 2,
           seed: int = 0, also: Sequence[str] = ()) -> tuple[list[Case], list[dict]]:
    """The cases of `catalogs` whose op matches a pattern (None: every op), in (catalog, op, case) order, and the
    ops left out with their reason. A pattern that matches no op of these catalogs (nor of `also`: the ops of the
    selected variants' own cases) is a UsageError."""
    if not catalogs:
        raise UsageError(f"no catalog given; the catalogs: {', '.join(CATALOGS)}")
    modules = {c: _module(c) for c in dict.fromkeys(catalogs)}
    if patterns is not None:
        _check_patterns(list(modules), patterns, also)
    out: list[Case] = []
    skipped: list[dict] = []
    for mod in modules.values():
        got, left = mod.cases(patterns, samples, seed)
        out += got
        skipped += left
    out.sort(key=lambda c: (c.catalog, c.op, _natural(c.case_id)))
    skipped.sort(key=lambda s: (s["catalog"], s["op"], _natural(s.get("case", ""))))
    return out, skipped


def _natural(text: str) -> list:
    """"op#10" after "op#9": numbers compare as numbers."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text)]


def _check_patterns(catalogs: list[str], patterns: list[str], also: Sequence[str] = ()) -> None:
    names = [n for c in catalogs for n in op_names(c)] + list(also)
    for p in patterns:
        if not p.strip():
            raise UsageError("an empty op pattern selects nothing; give a name or a glob such as '*avg_pool*'")
        if not any(matches(n, [p]) for n in names):
            close = closest(p, names)
            raise UsageError(f"no op of catalog {', '.join(catalogs)} matches {p!r}; closest: {', '.join(close)}")


def closest(pattern: str, names: list[str], n: int = SUGGESTIONS) -> list[str]:
    """The op names nearest a pattern (its glob characters stripped): a name scores by its best dotted suffix,
    so "avgpool2" finds "nn.functional.avg_pool2d" although the namespace makes the whole name far."""
    bare = re.sub(r"[*?\[\]]", "", pattern).lower()

    def score(name: str) -> float:
        parts = name.lower().split(".")
        return max(difflib.SequenceMatcher(None, bare, ".".join(parts[i:])).ratio() for i in range(len(parts)))

    return sorted(set(names), key=lambda x: (-score(x), x))[:n]


def write_case(case: Case, folder: Path) -> tuple[str, str | None]:
    """(model path, inputs npz or None) of a case as a model fpdiff's sources load, written under `folder`: a spec
    .py for a torch case, an .onnx with its inputs for an ONNX one. A payload with a `write(folder)` of its own
    (a fuzz graph) writes itself: the sweep runs any case that can become a model file."""
    own = getattr(case.payload, "write", None)
    if callable(own):
        return own(Path(folder))
    return _module(case.catalog).write_case(case, folder)


def deeper(case: Case, count: int, seed: int, keep) -> list[Case]:
    """Up to `count` other cases of `case`'s op that `keep` (a Case -> bool) accepts, those whose float inputs have
    the most dims first (then in catalog order): the samples behind a trivial first one."""
    return _module(case.catalog).deeper(case, count, seed, keep)
