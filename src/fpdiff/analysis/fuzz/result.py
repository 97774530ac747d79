"""What a fuzz campaign answers: how many graphs were tested, which were discarded and why, and its findings, each
a minimized graph with a semantic signature, the number of graphs that hit it, a checked repro and a report."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar

from fpdiff.analysis.base import Result
from fpdiff.analysis.fuzz.campaign import Found, GraphRecord
from fpdiff.analysis.fuzz.oracle import DISCARDED, FAILING, PASS
from fpdiff.analysis.ops.result import repro_command

NEXT_REPROS = 5  # repro commands next_steps() names: the first findings' (all are in the JSON)
UNRUN = "unrun"
LOST = "lost"  # its batch was lost on Ray (crashed or timed out): counted, never retried


@dataclass
class FuzzResult(Result):
    kind: ClassVar[str] = "fuzz"
    records: list[GraphRecord] = field(default_factory=list)
    findings: list[Found] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    precisions: list[str] = field(default_factory=list)
    seed: int = 0
    versions: dict = field(default_factory=dict)
    duration_s: float = 0.0
    ray: str | None = None
    model: str = "fuzz"
    selection: dict = field(default_factory=dict)  # ops, forms, min/max ops: what graph index i is (--resume)
    resumed: int = 0  # graphs kept from --resume's report
    # a stored campaign judged again (stored.py): its graphs' cells whose verdict changed, the rules it could not
    # re-apply
    rejudged: dict | None = None

    def tested(self) -> list[GraphRecord]:
        """The graphs that were judged (passed or failed), not the discarded or unrun ones."""
        return [r for r in self.records if r.outcome in (PASS, FAILING)]

    def discarded(self) -> list[GraphRecord]:
        return [r for r in self.records if r.outcome == DISCARDED]

    def discard_reasons(self) -> dict[str, int]:
        """How many graphs were discarded for each reason (the reason's first clause)."""
        return dict(Counter(_clause(r.discard or "") for r in self.discarded()).most_common())

    def rate(self) -> float:
        """Graphs tested per minute over the campaign's wall time."""
        return 60.0 * len(self.tested()) / self.duration_s if self.duration_s > 0 else 0.0

    def exit_code(self, strict: bool = False) -> int:
        """0: no finding; 1: a finding (a minimized failing graph); 3: no graph could be judged at all."""
        if self.findings:
            return 1
        return 0 if self.tested() else 3

    def next_steps(self) -> list[str]:
        """The repro command of the first findings that have a re-triggering repro (else any repro)."""
        ranked = sorted(self.findings, key=lambda f: (f.status != "mismatch", (f.repro or {}).get("retriggers")
                                                      is not True))
        paths = [(f.repro or {}).get("path") for f in ranked]
        return [repro_command(str(p)) for p in paths if p][:NEXT_REPROS]

    def as_dict(self) -> dict:
        tested = self.tested()
        return {"kind": self.kind, "fpdiff_version": self.versions.get("fpdiff"), "model": self.model,
                "versions": self.versions, "duration_s": round(self.duration_s, 3), "seed": self.seed,
                "backends": self.backends, "precisions": self.precisions, "ray": self.ray, **self.selection,
                "resumed": self.resumed,
                "generated": len([r for r in self.records if r.outcome not in (UNRUN, LOST)]),
                "graphs": len(tested), "failing_graphs": sum(r.outcome == FAILING for r in tested),
                "graphs_per_minute": round(self.rate(), 2),
                "unrun": sum(r.outcome == UNRUN for r in self.records),
                "lost": sum(r.outcome == LOST for r in self.records),
                "discarded": {"count": len(self.discarded()), "by_reason": self.discard_reasons(),
                              "graphs": [{"id": r.id, "seed": r.seed, "reason": r.discard} for r in self.discarded()]},
                "findings": [f.as_dict() for f in self.findings],
                "records": [r.__dict__ for r in self.records if r.outcome != UNRUN],
                "next": self.next_steps(), **({"rejudged": self.rejudged} if self.rejudged is not None else {})}


def _clause(text: str) -> str:
    return text.split(":")[0].strip() or "unknown"
