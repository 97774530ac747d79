"""What a check answers: one Cell (judging/cell.py) per (backend, device, precision, shape variant), and the run
they make."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from fpdiff.analysis.base import Result
from fpdiff.core.status import CELL_STATUSES, FAILING, NOT_JUDGED, NOTHING_JUDGED, fails
from fpdiff.judging.cell import Cell


@dataclass
class CheckResult(Result):
    kind: ClassVar[str] = "check"
    model: str
    cells: list[Cell]
    reference: dict
    versions: dict
    duration_s: float = 0.0
    judge: dict = field(default_factory=dict)  # the judge's cross-check (see judging/judge.py)
    source: dict = field(default_factory=dict)  # how the model was brought in: opset conversion, inputs
    fingerprint: str = ""  # the model's content hash (spec and weights, or the ONNX file and inputs)
    next: list[str] = field(default_factory=list)  # the locate/plan commands that explain its failing cells
    evidence: dict | None = None  # what the rules judged from (judging/evidence.py): `fpdiff rejudge` reads it
    # a stored run judged again: its cells whose verdict changed (label, from, to) and rules it could not re-apply
    rejudged: dict | None = None

    def exit_code(self, strict: bool = False) -> int:
        """0: every judged cell holds; 1: a cell fails (an error or crash too: something broke, which a script
        testing for 1 must see); NOTHING_JUDGED: no cell failed and none reached a verdict (all refused or unjudged)."""
        if any(fails(c.status, [f.kind for f in c.findings], strict) and c.status in FAILING for c in self.cells):
            return 1
        if not self.judged():
            return NOTHING_JUDGED
        return int(any(fails(c.status, [f.kind for f in c.findings], strict) for c in self.cells))

    def judged(self) -> int:
        """Cells that reached a verdict on the numbers (pass, precision-loss, mismatch, ...)."""
        return sum(c.status not in NOT_JUDGED for c in self.cells)

    def nothing_judged(self) -> str | None:
        """One line saying that no cell could be judged, and what the cells were instead; None when some were."""
        if self.judged():
            return None
        counts: dict[str, int] = {}
        for c in self.cells:
            counts[str(c.status)] = counts.get(str(c.status), 0) + 1
        what = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no cells"
        return (f"nothing was judged: no cell of {len(self.cells)} reached a verdict ({what}); "
                f"exit {self.exit_code()}")

    def next_steps(self) -> list[str]:
        return list(self.next)

    def as_dict(self) -> dict:
        return {"kind": self.kind, "fpdiff_version": self.versions.get("fpdiff"), "model": self.model,
                "model_hash": self.fingerprint, "reference": self.reference,
                "judge": self.judge, "source": self.source, "versions": self.versions,
                "duration_s": round(self.duration_s, 3),
                "cells": [c.as_dict() for c in self.cells],
                "summary": {s: sum(c.status == s for c in self.cells) for s in CELL_STATUSES},
                "next": list(self.next),
                **({"rejudged": self.rejudged} if self.rejudged is not None else {}),
                **({"evidence": self.evidence} if self.evidence is not None else {})}
