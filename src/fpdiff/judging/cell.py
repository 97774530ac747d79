"""A cell: one (backend, device, precision, shape variant) job judged against float64 and its baseline, with every
rule's change to its verdict. Every analysis that judges cells (check, ops, fuzz) uses this one type."""
from __future__ import annotations

from dataclasses import dataclass, field

from fpdiff.core.compare import Finding
from fpdiff.core.status import Status


@dataclass(frozen=True)
class Revision:
    """One rule's change to a cell's verdict: which rule, from what, to what, and why (the verdict's provenance)."""
    rule: str
    was: str
    now: str
    why: str

    def as_dict(self) -> dict:
        return {"rule": self.rule, "from": self.was, "to": self.now, "why": self.why}


@dataclass
class Cell:
    backend: str
    device: str
    precision: str
    shape_variant: str
    status: Status
    reason: str = ""
    metrics: dict | None = None
    baseline_metrics: dict | None = None
    computed_dtype: str | None = None
    output_dtypes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    duration_s: float = 0.0
    info: dict = field(default_factory=dict)
    effective_bits: float | None = None  # mantissa bits the cell's error corresponds to (compare.effective_bits)
    stage: str | None = None  # failed cells: the stage that failed (torch.export, onnx export, compile, run, ...)
    component: str | None = None  # failed cells: who failed there, or "internal error in fpdiff"
    op_dtypes: dict[str, int] | None = None  # the backend's float ops by the dtype each ran in, when it counts them
    planned_op_dtypes: dict[str, int] | None = None  # the same count on the graph it was handed, when that mixes
    revisions: list[Revision] = field(default_factory=list)  # every rule that changed the status, in order

    def as_dict(self) -> dict:
        return cell_dict(self)

    def revise(self, rule: str, status: str, reason: str, why: str | None = None) -> None:
        """The one place a cell's status is written after its job ran, so every verdict says which rules made it."""
        status = Status(status)
        if status != self.status:
            self.revisions.append(Revision(rule, str(self.status), str(status), why or reason))
        self.status, self.reason = status, reason

    @property
    def label(self) -> str:
        return f"{self.backend}/{self.device}/{self.precision}/{self.shape_variant}"


def cell_dict(cell) -> dict:
    """A cell dataclass as its JSON: its fields, its findings as plain dicts."""
    d = dict(cell.__dict__)
    d["findings"] = [f.as_dict() for f in cell.findings]
    if "revisions" in d:
        d["revisions"] = [r.as_dict() for r in cell.revisions]
    return d
