"""Triaged findings that a published table's rows link to: a folder of reports, one subfolder each, holding its
REPORT.md (title first) and a finding.json saying what it is about: {"id", "component": the backend or the exporter
("torch.onnx") whose bug it is, "ops": the op names in their catalogs, "precisions": where it shows ([]: every one),
"kind": "bug" or "limit"}. A row links each report of its op whose component is its backend or the exporter its
failure is charged to, at its precision."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from fpdiff.core.errors import UsageError

FILE, REPORT = "finding.json", "REPORT.md"


@dataclass(frozen=True)
class Finding:
    """One triaged report and what it is about."""
    id: str
    folder: str
    title: str
    component: str
    ops: tuple[str, ...]
    precisions: tuple[str, ...]
    kind: str
    url: str

    def covers(self, op: str, backend: str, precision: str, charged: str) -> bool:
        """Whether a row of this op, backend and precision (its failure charged to `charged`, or '') is this
        report's."""
        who = self.component == backend or (charged and charged.split(" at ")[0] == self.component)
        return bool(who) and op in self.ops and (not self.precisions or precision in self.precisions)

    def as_link(self) -> dict:
        return {"id": self.id, "title": self.title, "url": self.url, "kind": self.kind}


def load(folder: str | Path, url: str) -> list[Finding]:
    """Every report of the folder that has a finding.json; `url` the link, '{folder}' the report's subfolder. A
    folder that is not there, or a finding.json that cannot be read, is a one-line UsageError."""
    root = Path(folder)
    if not root.is_dir():
        raise UsageError(f"--findings {folder}: not a folder of findings")
    out = []
    for sub in sorted(d for d in root.iterdir() if (d / FILE).is_file()):
        try:
            meta = json.loads((sub / FILE).read_text())
            out.append(Finding(str(meta["id"]), sub.name, _title(sub), str(meta["component"]),
                               tuple(map(str, meta["ops"])), tuple(map(str, meta.get("precisions") or ())),
                               str(meta.get("kind") or "bug"), url.replace("{folder}", sub.name)))
        except (ValueError, KeyError, TypeError) as e:
            raise UsageError(f"--findings {folder}: {sub.name}/{FILE} cannot be read ({type(e).__name__}: {e})") \
                from None
    return out


def _title(sub: Path) -> str:
    """The report's first heading, without its '#'; the folder's name where it has none."""
    report = sub / REPORT
    if report.is_file():
        for line in report.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return sub.name


def relative_url(folder: str | Path, out_dir: str | Path) -> str:
    """A report's REPORT.md as seen from the published page's folder."""
    rel = os.path.relpath(Path(folder).resolve(), Path(out_dir).resolve())
    return f"{Path(rel).as_posix()}/{{folder}}/{REPORT}"


def link(entries, found: list[Finding]) -> None:
    """Give each row the reports that cover it (a row not run has none)."""
    for e in entries:
        e.findings = [f.as_link() for f in found if f.covers(e.op, e.backend, e.precision, e.charged)]
