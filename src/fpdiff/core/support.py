"""A runtime's own word on what it ran at a cell's dtype, typed: what a backend returns beside its outputs
(Prepared.support, JobResult.support) and what the op sweep reads a cell's support state from. Each entry (an op type
of the graph handed to the runtime, or the whole compiled graph) has a state: native (a kernel at the dtype asked),
other-dtype (the runtime computed it in another dtype: casts inserted, a hint replaced) or not-implemented (it
refused); an entry with no state is one the runtime said nothing of."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NATIVE, OTHER_DTYPE, NOT_IMPLEMENTED = "native", "other-dtype", "not-implemented"
STATES = (NATIVE, OTHER_DTYPE, NOT_IMPLEMENTED)


@dataclass
class Support:
    """`runtime`: the runtime and version that said it; `ops`: op type -> entry ({"state", "said", and the runtime's
    details: kernel types registered, precisions its layers ran}); `graph`: the whole graph's entry, for a compiler
    whose dispatches are not the source's ops; `not_recorded`: entries left out of a long record, by what they are
    ("ops", "dispatches"); `details`: the rest of the runtime's word (OpenVINO's hint and the one it ran)."""
    runtime: str
    ops: dict[str, dict[str, Any]] = field(default_factory=dict)
    graph: dict[str, Any] | None = None
    not_recorded: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """A state no reader knows is the backend's bug, said where it makes the record."""
        for name, entry in self.entries():
            if entry.get("state") not in (*STATES, None):
                raise ValueError(f"support entry {name!r}: state {entry.get('state')!r} is none of {', '.join(STATES)}")

    def entries(self) -> list[tuple[str, dict[str, Any]]]:
        """Every entry, the ops' then the graph's."""
        return [*self.ops.items(), *([("graph", self.graph)] if self.graph is not None else [])]

    @property
    def cut(self) -> bool:
        """Whether entries were left out (so an op asked about may be among them)."""
        return any(self.not_recorded.values())

    def narrowed(self, ops: frozenset[str]) -> Support:
        """The record of these op types alone (a case's own, in a program of many)."""
        return Support(self.runtime, {k: v for k, v in self.ops.items() if k in ops}, self.graph, {}, self.details)

    def as_dict(self) -> dict[str, Any]:
        """The record as reports show it."""
        return {"runtime": self.runtime, **self.details, "ops": self.ops,
                **({"graph": self.graph} if self.graph is not None else {}),
                **{f"{k}_not_recorded": n for k, n in self.not_recorded.items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Support:
        """A record from its report form (as_dict)."""
        cut = {k.removesuffix("_not_recorded"): int(v) for k, v in d.items() if k.endswith("_not_recorded")}
        details = {k: v for k, v in d.items() if k not in ("runtime", "ops", "graph") and k.removesuffix(
            "_not_recorded") not in cut}
        return cls(str(d.get("runtime", "")), dict(d.get("ops") or {}), d.get("graph"), cut, details)
