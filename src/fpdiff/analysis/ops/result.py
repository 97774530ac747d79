"""What an op sweep answers: one OpsCell per (case, backend, precision, shape variant), the catalog entries it did
not run and why, the judge's second opinions, how many repros re-trigger, and the support table a team keeps
(`--save`) to see what an upgrade changed."""
from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from fpdiff.analysis.base import Result
from fpdiff.analysis.ops.case import OpsCell
from fpdiff.core.compare import Finding
from fpdiff.core.errors import UsageError
from fpdiff.core.status import CELL_STATUSES, FAILING, Status, fails
from fpdiff.judging.cell import Revision

TABLE_KIND = "ops-support"  # the "kind" of a saved support table (--save), which `fpdiff diff` reads
# the most repro commands next_steps() names: one per distinct bug, a handful to start with (all are in "reports")
NEXT_REPROS = 5


@dataclass
class OpsResult(Result):
    kind: ClassVar[str] = "ops"
    cells: list[OpsCell] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # catalog entries not run: {"catalog", "op", "reason"}
    unrun: int = 0  # cases not started: the --time budget ran out first
    unrun_cases: list[dict] = field(default_factory=list)  # which: {"catalog", "op", "case"} (the page's "not run")
    versions: dict = field(default_factory=dict)
    duration_s: float = 0.0
    # ONNX cases whose catalog-expected output disagrees with the float64 judge: {"case", "op", "rel_l2", "detail"}
    judge_disagreements: list[dict] = field(default_factory=list)
    repro_check: dict = field(default_factory=dict)  # {"written", "retriggered", "broken"}
    reports: list[dict] = field(default_factory=list)  # one per distinct bug: {"signature", "cells", "path"}
    model: str = "ops"  # the history's label of the sweep, e.g. "ops: torch,onnx"
    # what --resume holds a report to: {"backends", "precisions", "seed", "catalogs", "patterns", "variants"}
    selection: dict = field(default_factory=dict)
    resumed: int = 0  # cases whose cells came from --resume's report, not run again
    # how cases ran: {"cases", "in_programs", "programs", "alone"} (batch.py; alone: one-op models run)
    programs: dict = field(default_factory=dict)
    # a stored sweep judged again (stored.py): its cells whose verdict changed and the rules it could not re-apply
    rejudged: dict | None = None

    def cell_fails(self, c: OpsCell, strict: bool = False) -> bool:
        """check's rule, except that under --strict a declared refusal (unsupported) does not fail: in a sweep it
        is a support fact for the table, and every real stack lacks some kernels, so strict would always fail."""
        if strict and c.status == Status.UNSUPPORTED:
            return False
        return fails(c.status, [f.kind for f in c.findings], strict)

    def exit_code(self, strict: bool = False) -> int:
        """0: no cell fails; 1: a cell is mismatch, error, crash or timeout (--strict: also not a clean pass)."""
        return int(any(self.cell_fails(c, strict) for c in self.cells))

    def failing(self) -> list[OpsCell]:
        """The cells that fail the run: mismatches first (a wrong answer given silently is what the sweep hunts),
        then by status, catalog, op and case."""
        bad = [c for c in self.cells if c.status in FAILING]
        return sorted(bad, key=lambda c: (c.status != Status.MISMATCH, str(c.status), c.catalog, c.op, c.case,
                                          c.backend, c.precision, c.shape_variant))

    def summary(self) -> dict[str, int]:
        """Cells per status, every status named (as check's summary)."""
        counts = Counter(str(c.status) for c in self.cells)
        return {str(s): counts.get(str(s), 0) for s in CELL_STATUSES}

    def by_backend(self) -> dict[str, dict[str, int]]:
        """Cells per backend and status (the statuses a backend has)."""
        out: dict[str, Counter] = {}
        for c in self.cells:
            out.setdefault(c.backend, Counter())[str(c.status)] += 1
        return {b: dict(n) for b, n in out.items()}

    def matrix(self) -> dict[str, dict[str, dict[str, dict[str, int]]]]:
        """family -> backend -> precision -> status -> cells: the terminal's and HTML's matrix."""
        out: dict = {}
        for c in self.cells:
            by_status = out.setdefault(c.family, {}).setdefault(c.backend, {}).setdefault(c.precision, {})
            by_status[str(c.status)] = by_status.get(str(c.status), 0) + 1
        return {f: out[f] for f in sorted(out)}

    def repro_share(self) -> str | None:
        """'repros re-trigger 19 of 20 (95%)', or None when no repro was written."""
        written = int(self.repro_check.get("written") or 0)
        if not written:
            return None
        hit = int(self.repro_check.get("retriggered") or 0)
        line = f"repros re-trigger {hit} of {written} ({hit / written:.0%})"
        broken = int(self.repro_check.get("broken") or 0)
        return line + (f"; {broken} broken (the repro itself failed to run)" if broken else "")

    def mixed_only(self) -> list[dict]:
        """Each case, backend and precision right with every dim static and every dim dynamic and wrong in a mix
        (SEEDS.md #2's signature), with its status per shape variant."""
        from fpdiff.analysis.ops.verdict import wrong_only_in_mixes
        shapes: dict[tuple, dict[str, str]] = {}
        for c in self.cells:
            shapes.setdefault((c.case, c.backend, c.precision), {})[c.shape_variant] = str(c.status)
        return [{"case": k[0], "backend": k[1], "precision": k[2], "shapes": v}
                for k, v in shapes.items() if wrong_only_in_mixes(v)]

    def support_table(self) -> list[dict]:
        """One row per (catalog, op, backend, precision): {catalog, op, backend, precision, support, detail}, the
        most telling support state among its cells (support.py)."""
        from fpdiff.analysis.ops.support import support_table
        return support_table(self.cells)

    def save_table(self, path: str | Path) -> None:
        """The support table as JSON ({"kind": "ops-support", "versions", "rows"}), for `fpdiff diff` later."""
        p = Path(path)
        data = {"kind": TABLE_KIND, "model": self.model, "versions": self.versions, "rows": self.support_table()}
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(data, indent=1, default=str))
        except OSError as e:
            raise UsageError(f"cannot write the support table to {path}: {e.strerror or e}") from None

    def next_steps(self) -> list[str]:
        """The repro command of each distinct failing bug (repro.signature), mismatches first, at most NEXT_REPROS;
        a bug's first re-triggering repro where it has one."""
        from fpdiff.analysis.ops.repro import signature
        seen: dict[str, str] = {}
        for c in sorted(self.failing(), key=lambda c: (c.status != Status.MISMATCH, (c.repro or {}).get("retriggers")
                                                       is not True)):
            path = (c.repro or {}).get("path")
            if path:
                seen.setdefault(signature(c), repro_command(str(path)))
        return list(dict.fromkeys(seen.values()))[:NEXT_REPROS]

    def as_dict(self) -> dict:
        cells, evidence = self._cells_and_evidence()
        return {"kind": self.kind, "fpdiff_version": self.versions.get("fpdiff"), "model": self.model,
                "versions": self.versions, "duration_s": round(self.duration_s, 3),
                "cells": cells, "summary": self.summary(),
                "by_backend": self.by_backend(), "matrix": self.matrix(), "skipped": list(self.skipped),
                "unrun": self.unrun, "unrun_cases": list(self.unrun_cases),
                "judge_disagreements": list(self.judge_disagreements),
                "repro_check": dict(self.repro_check), "reports": list(self.reports),
                "support_table": self.support_table(), "next": self.next_steps(), "selection": dict(self.selection),
                "resumed": self.resumed, "programs": dict(self.programs), "mixed_only": self.mixed_only(),
                **({"rejudged": self.rejudged} if self.rejudged is not None else {}),
                "evidence": evidence}

    def _cells_and_evidence(self) -> tuple[list[dict], list[dict]]:
        """The cells as JSON, each naming its judgement's evidence by index ("evidence"), and those evidences once
        each (the cells of one case's judgement share one)."""
        cells, evidence, index = [], [], {}
        for c in self.cells:
            d = c.as_dict()
            if c.judged_from is not None:
                if id(c.judged_from) not in index:
                    index[id(c.judged_from)] = len(evidence)
                    evidence.append(c.judged_from)
                d["evidence"] = index[id(c.judged_from)]
            cells.append(d)
        return cells, evidence


def repro_command(path: str) -> str:
    """How to run a repro: its script, or the repro.py in its folder."""
    return f"python {path}" if path.endswith(".py") else f"python {path.rstrip('/')}/repro.py"


@dataclass
class Previous:
    """What a cut run's report (--resume) judged: its cells and the cases it skipped, by case id, and the catalog's
    second opinions on them."""
    cells: dict[str, list[OpsCell]]
    skipped: dict[str, str]  # case id -> why it could not be judged
    disagreements: dict[str, dict]

    @property
    def case_ids(self) -> set[str]:
        return set(self.cells) | set(self.skipped)


def previous_run(path: str, backends: Sequence[str], precisions: Sequence[str], seed: int) -> Previous:
    """An ops report to resume from, held to this run's backends, precisions and seed (other cells, or other inputs,
    would be merged as if this run had judged them); any other file is a one-line usage error."""
    from fpdiff.core.jsonfile import read
    data = read(path, "an ops report (fpdiff ops --json RUN.json)")
    if not isinstance(data, dict) or data.get("kind") != "ops" or not isinstance(data.get("cells"), list):
        kind = data.get("kind") if isinstance(data, dict) else None
        raise UsageError(f"--resume {path}: not an ops report ({f'a {kind} report' if kind else 'no kind'}); give "
                         "the file fpdiff ops --json wrote")
    try:
        cells = [cell_from_dict(d, data.get("evidence") or ()) for d in data["cells"]]
    except (TypeError, KeyError) as e:
        raise UsageError(f"--resume {path}: a cell of the report cannot be read ({type(e).__name__}: {e})") from None
    _same_selection(path, data.get("selection") or {}, cells, backends, precisions, seed)
    by_case: dict[str, list[OpsCell]] = {}
    for c in cells:
        by_case.setdefault(c.case, []).append(c)
    skipped = {s["case"]: str(s.get("reason", "")) for s in data.get("skipped") or []
               if isinstance(s, dict) and s.get("case") and s["case"] not in by_case}
    agree = {d["case"]: d for d in data.get("judge_disagreements") or [] if isinstance(d, dict) and d.get("case")}
    return Previous(by_case, skipped, agree)


def _same_selection(path: str, had: dict, cells: list[OpsCell], backends: Sequence[str], precisions: Sequence[str],
                    seed: int) -> None:
    """The report's backends, precisions and seed are this run's (a report without its selection: its cells')."""
    want_b, want_p = sorted(backends), sorted(precisions)
    got_b = sorted(had.get("backends") or {c.backend for c in cells})
    got_p = sorted(had.get("precisions") or {c.precision for c in cells})
    fits = (got_b == want_b and got_p == want_p) if had else (set(got_b) <= set(want_b) and set(got_p) <= set(want_p))
    if not fits:
        raise UsageError(f"--resume {path}: that run is of backends {','.join(got_b)} at {','.join(got_p)}, this one "
                         f"asks {','.join(want_b)} at {','.join(want_p)}; resume with the same --backends and "
                         "--precisions")
    if had.get("seed") is not None and had["seed"] != seed:
        raise UsageError(f"--resume {path}: that run used --seed {had['seed']}, this one {seed}: its variants' inputs "
                         "differ; resume with the same --seed")


def cell_from_dict(d: dict, evidence: Sequence[dict] = ()) -> OpsCell:
    """An OpsCell from its JSON (as_dict), its findings and revisions as objects again, and the evidence it names
    (of the report's `evidence`); a report written before ops cells were cells of the judging floor has no device
    (cpu: the sweep's only one)."""
    names = {f.name for f in dataclasses.fields(OpsCell)} - {"judged_from"}
    kept = {"device": "cpu", **{k: v for k, v in d.items() if k in names}}
    kept["findings"] = [Finding(**{k: f.get(k) for k in ("kind", "message", "op", "remedy")})
                        for f in d.get("findings") or []]
    kept["revisions"] = [Revision(r["rule"], r["from"], r["to"], r["why"]) for r in d.get("revisions") or []]
    kept["status"] = Status(kept["status"])
    i = d.get("evidence")
    if isinstance(i, int) and 0 <= i < len(evidence):
        kept["judged_from"] = evidence[i]
    return OpsCell(**kept)
