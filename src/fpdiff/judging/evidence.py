"""A check's evidence as plain JSON and back: every job's facts (without its tensors), the judge's cross-check, and
every measurement the rules asked for. The JSON report carries it as "evidence", so `fpdiff rejudge` judges a stored
run again by today's rules without running a backend, and a changed rule's effect on a whole corpus is re-derived
from its stored runs."""
from __future__ import annotations

import math
from dataclasses import fields, replace

from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding, Metrics
from fpdiff.core.errors import UsageError
from fpdiff.core.judge_status import JudgeStatus
from fpdiff.core.status import Status
from fpdiff.core.support import Support
from fpdiff.judging.conditioning import Spread
from fpdiff.judging.grid import CellKey, Grid
from fpdiff.judging.judge import JudgeCheck
from fpdiff.judging.rules import Evidence
from fpdiff.model.graph import ShapeVariant
from fpdiff.runtime.worker import JobResult
from fpdiff.sources.base import Source, SourceRef

# the form of "evidence" in a report; a report of another form is refused in one line rather than misread
FORM = 1


def save(ev: Evidence) -> dict:
    """The evidence as JSON: what `load` needs to judge the run again."""
    g = ev.grid
    return {"form": FORM, "kind": g.source.ref.kind, "label": g.source.ref.label,
            "tolerance": dict(g.source.tolerance), "judge_backend": g.judge_backend,
            "precisions": [p.name for p in g.precisions], "cells": [_key(k) for k in g.cells],
            "reference": _facts(ev.ref), "has_reference": ev.has_reference,
            "jobs": [{"key": _key(k), "result": _facts(r)} for k, r in ev.results.items()],
            "judge": {**ev.verdict.as_dict(), "stand_in": _key(ev.verdict.stand_in) if ev.verdict.stand_in else None,
                      "spread": _encode(ev.verdict.spread), "has_reading": ev.verdict.reading is not None},
            "kept": {name: _encode(v) for name, v in ev.kept.items()}}


def load(d: dict) -> Evidence:
    """A stored run's evidence, ready for the rules: jobs without tensors, kept measurements, `stored` set."""
    if not isinstance(d, dict) or d.get("form") != FORM:
        raise UsageError(f"this report's evidence is of another form ({d.get('form') if isinstance(d, dict) else d!r}"
                         f"; this fpdiff reads form {FORM}): rerun the check to judge it again")
    source = Source(SourceRef(d["kind"], "", d["label"]), (), [], tolerance=dict(d.get("tolerance") or {}))
    grid = Grid(source, None, [prec.get(n) for n in d["precisions"]], [_unkey(k) for k in d["cells"]],
                d["judge_backend"], "")
    results = {_unkey(j["key"]): _result(j["result"]) for j in d["jobs"]}
    ref = _result(d["reference"])
    kept = {name: _decode(v) for name, v in d["kept"].items()}
    kept["has reference"] = bool(d.get("has_reference"))
    return Evidence(grid, results, ref, _judge(d["judge"]), {}, 0.0, kept=kept, stored=True)


def _key(k: CellKey) -> dict:
    v = k.variant
    return {"backend": k.backend, "device": k.device, "precision": k.precision.name,
            "tolerance": k.precision.tolerance, "variant": v.name,
            "static": sorted(v.static) if v.static is not None else None}


def _unkey(d: dict) -> CellKey:
    static = frozenset(d["static"]) if d.get("static") is not None else None
    return CellKey(d["backend"], d["device"], replace(prec.get(d["precision"]), tolerance=float(d["tolerance"])),
                   ShapeVariant(d["variant"], static))


def _facts(r: JobResult) -> dict:
    """A job's result without its tensors (outputs and repeated runs are what the kept measurements were made of)."""
    d = {f.name: getattr(r, f.name) for f in fields(r) if f.name not in ("outputs", "repeats")}
    d["notes"] = [_encode(n) for n in r.notes]
    d["status"] = str(r.status)
    d["support"] = r.support.as_dict() if r.support is not None else None
    return d


def _result(d: dict) -> JobResult:
    known = {f.name for f in fields(JobResult)}
    r = JobResult(**{k: v for k, v in d.items() if k in known})
    r.status, r.notes, r.outputs = Status(r.status), [_decode(n) for n in r.notes], []
    r.support = Support.from_dict(r.support) if isinstance(r.support, dict) else None
    return r


def _judge(d: dict) -> JudgeCheck:
    known = {f.name for f in fields(JudgeCheck)} - {"stand_in", "reading", "spread"}
    check = JudgeCheck(**{k: v for k, v in d.items() if k in known})
    check.status = JudgeStatus(check.status)
    check.stand_in = _unkey(d["stand_in"]) if d.get("stand_in") else None
    check.spread = _decode(d.get("spread"))
    check.reading = [] if d.get("has_reading") else None  # the reading's tensors are not kept: its measurements are
    return check


def _encode(v: object) -> object:
    """A kept value as JSON: metrics, findings and spreads tagged by type, sequences as lists."""
    if isinstance(v, Metrics):
        return {"_": "metrics", **{k: _number(x) for k, x in v.__dict__.items()}}
    if isinstance(v, Finding):
        return {"_": "finding", **v.as_dict()}
    if isinstance(v, Spread):
        return {"_": "spread", **{k: _number(x) for k, x in v.__dict__.items()}}
    if isinstance(v, (list, tuple)):
        return [_encode(x) for x in v]
    return _number(v)


def _decode(v: object) -> object:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict) or "_" not in v:
        return v
    body = {k: _float(x) for k, x in v.items() if k != "_"}
    kind = v["_"]
    if kind == "finding":
        return Finding(**{k: v[k] for k in ("kind", "message", "op", "remedy")})
    return Metrics(**body) if kind == "metrics" else Spread(**body)


def _number(x: object) -> object:
    """Non-finite floats as strings JSON can hold ("inf", "-inf", "nan"); everything else as it is."""
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _float(x: object) -> object:
    return float(x) if x in ("inf", "-inf", "nan") else x
