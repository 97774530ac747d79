"""The run history: every check in SQLite, so a team sees which cells changed between two runs (after an upgrade of
IREE, ORT, torch). One transaction per run (a killed run leaves nothing half-written), WAL so runs can land at once."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status

SCHEMA = 1
# How much a cell's error may grow between two runs before `fpdiff diff` calls it a regression: 4x is the check's
# own baseline factor, the spread a correct backend shows against the baseline; growing beyond it means the
# numbers got worse, not noisier.
ERROR_GROWTH = 4.0
LOCK_TIMEOUT = 30.0  # seconds to wait for another run's write before saying the store is locked


def default_path() -> Path:
    base = os.environ.get("FPDIFF_STORE")
    if base:
        return Path(base)
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "fpdiff" / "history.sqlite"


def _connect(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(str(path), timeout=LOCK_TIMEOUT, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("BEGIN IMMEDIATE")
        con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        row = con.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        if row is None:
            con.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA),))
            con.execute("""CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL, kind TEXT,
                model TEXT, model_hash TEXT, versions TEXT, flags TEXT, exit_code INTEGER, result TEXT)""")
            con.execute("""CREATE TABLE cells (run INTEGER REFERENCES runs(id), backend TEXT, device TEXT,
                precision TEXT, variant TEXT, status TEXT, rel_l2 REAL, max_norm REAL, reason TEXT, findings TEXT)""")
        elif int(row[0]) > SCHEMA:
            con.execute("ROLLBACK")
            raise UsageError(f"the history {path} has schema {row[0]}, this fpdiff reads {SCHEMA}: a newer fpdiff "
                             "wrote it (use that, or --store another file)")
        con.execute("COMMIT")
        return con
    except sqlite3.OperationalError as e:
        raise UsageError(f"cannot use the history {path}: {e} (another run holds it, or it is read-only; "
                         "--store another file or --no-store)") from None
    except sqlite3.DatabaseError as e:
        raise UsageError(f"{path} is not an fpdiff history ({e})") from None
    except OSError as e:
        raise UsageError(f"cannot use the history {path}: {e.strerror or e}") from None


def save_result(result, path: Path, flags: dict, exit_code: int,
                cells: Callable[[Any], list[tuple]] | None = None) -> int:
    """Store one run of any analysis (its whole JSON report, and its cells in the history's columns where its
    declaration gives them: check_cells, ops_cells; fpdiff diff compares those) in one transaction; returns the run's
    id."""
    from fpdiff.core.versions import report_versions
    report = result.as_dict()
    rows = cells(result) if cells else []
    versions = report["versions"] if "versions" in report else report_versions()
    return save(result.kind, result.model, report.get("model_hash") or "", versions, flags, exit_code, report, path,
                rows)


def save(kind: str, model: str, model_hash: str, versions: dict, flags: dict, exit_code: int, report: dict,
         path: Path, cells: list[tuple] = ()) -> int:
    """Store one run (its kind, its whole JSON report) and its cells in one transaction."""
    con = _connect(path)
    try:
        con.execute("BEGIN IMMEDIATE")
        cur = con.execute("INSERT INTO runs (started, kind, model, model_hash, versions, flags, exit_code, result) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (time.time(), kind, model, model_hash, json.dumps(versions),
                           json.dumps(flags, default=str), exit_code, json.dumps(report, default=str)))
        run = cur.lastrowid
        con.executemany("INSERT INTO cells VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [(run, *c) for c in cells])
        con.execute("COMMIT")
        return run
    except sqlite3.OperationalError as e:
        if con.in_transaction:
            con.execute("ROLLBACK")
        raise UsageError(f"cannot write the history {path}: {e} (--store another file or --no-store)") from None
    finally:
        con.close()


def runs(path: Path, model: str | None = None) -> list[dict]:
    con = _connect(path)
    try:
        q = "SELECT id, started, kind, model, exit_code, versions FROM runs"
        rows = con.execute(q + (" WHERE model = ? ORDER BY id" if model else " ORDER BY id"),
                           (model,) if model else ()).fetchall()
        out = []
        for rid, started, kind, m, code, versions in rows:
            counts = dict(con.execute("SELECT status, COUNT(*) FROM cells WHERE run=? GROUP BY status", (rid,)))
            out.append({"id": rid, "started": started, "kind": kind, "model": m, "exit_code": code,
                        "versions": json.loads(versions or "{}"), "cells": counts})
        return out
    finally:
        con.close()


def cells(path: Path, run: int, compared: Collection[str]) -> tuple[dict, dict]:
    """(the run's row, its cells keyed by backend/device/precision/variant); `compared`: the kinds of run that store
    cells (the analyses whose declaration gives them)."""
    con = _connect(path)
    try:
        row = con.execute("SELECT id, model, model_hash, versions, kind FROM runs WHERE id=?", (run,)).fetchone()
        if row is None:
            raise UsageError(f"no run {run} in the history {path} (fpdiff history lists them)")
        if row[4] not in compared:
            raise UsageError(f"run {run} is a {row[4]} run; fpdiff diff compares runs cell by cell "
                             f"({', '.join(compared)} runs)")
        found = {}
        for b, d, p, v, status, rel, mx, reason in con.execute(
                "SELECT backend, device, precision, variant, status, rel_l2, max_norm, reason FROM cells WHERE run=?",
                (run,)):
            found[f"{b}/{d}/{p}/{v}"] = {"status": status, "rel_l2": rel, "max_norm": mx, "reason": reason}
        return {"id": row[0], "model": row[1], "model_hash": row[2], "versions": json.loads(row[3] or "{}"),
                "kind": row[4]}, found
    finally:
        con.close()


def diff(path: Path, a: int, b: int, compared: Collection[str]) -> dict:
    """What changed from run a to run b: verdicts, errors (beyond ERROR_GROWTH counts as a regression), versions."""
    run_a, cells_a = cells(path, a, compared)
    run_b, cells_b = cells(path, b, compared)
    if run_a["kind"] != run_b["kind"]:
        raise UsageError(f"run {a} is a {run_a['kind']} run and run {b} a {run_b['kind']} run: nothing to compare")
    if run_a["model"] != run_b["model"]:
        raise UsageError(f"runs {a} and {b} are of different models ({run_a['model']} and {run_b['model']}): "
                         "nothing to compare cell by cell")
    changed, regressions = [], 0
    for key in sorted(set(cells_a) | set(cells_b)):
        x, y = cells_a.get(key), cells_b.get(key)
        if x is None or y is None:
            changed.append({"cell": key, "before": x and x["status"], "after": y and y["status"], "kind": "only one"})
            continue
        worse = _rank(y["status"]) > _rank(x["status"])
        grew = (x["rel_l2"] is not None and y["rel_l2"] is not None and x["rel_l2"] > 0
                and y["rel_l2"] > ERROR_GROWTH * x["rel_l2"])
        better = _rank(y["status"]) < _rank(x["status"])
        if worse or grew or better or x["status"] != y["status"]:
            kind = "regression" if worse or grew else "improvement" if better else "changed"
            regressions += kind == "regression"
            changed.append({"cell": key, "before": x["status"], "after": y["status"], "rel_l2_before": x["rel_l2"],
                            "rel_l2_after": y["rel_l2"], "kind": kind, "reason": y["reason"]})
    versions = {k: (run_a["versions"].get(k), run_b["versions"].get(k))
                for k in sorted(set(run_a["versions"]) | set(run_b["versions"]))
                if run_a["versions"].get(k) != run_b["versions"].get(k)}
    return {"model": run_a["model"], "a": a, "b": b, "changed": changed, "regressions": regressions,
            "versions": versions, "same_model_hash": run_a["model_hash"] == run_b["model_hash"]}


def _rank(status: str) -> int:
    """A stored status's rank; one this fpdiff does not know (a newer one wrote it) counts as the worst."""
    try:
        return Status(status).rank
    except ValueError:
        return max(s.rank for s in Status)


def load_table(path: str | Path) -> dict:
    """A saved support table (`fpdiff ops --save`), or an ops JSON report's table; anything else is one line."""
    from fpdiff.analysis.ops.result import TABLE_KIND  # here: it loads torch, which history and diff need not
    from fpdiff.report.json_report import read
    data = read(path, "a support table `fpdiff ops --save` wrote")
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "ops" and isinstance(data.get("support_table"), list):
        return {"kind": TABLE_KIND, "versions": data.get("versions") or {}, "rows": data["support_table"]}
    if kind != TABLE_KIND or not isinstance(data.get("rows"), list):
        raise UsageError(f"{path} is not a support table (kind {kind!r}): give files `fpdiff ops --save` wrote")
    return data


def _table_key(row: dict) -> str:
    return f"{row.get('catalog')}/{row.get('op')}/{row.get('backend')}/{row.get('precision')}"


def _support_move(before: str | None, after: str | None) -> str:
    """gained / lost / changed between two known states (a state this fpdiff does not know: changed)."""
    from fpdiff.analysis.ops.case import NATIVE, NOT_IMPLEMENTED, OTHER_DTYPE  # here: it loads torch
    order = (NOT_IMPLEMENTED, OTHER_DTYPE, NATIVE)  # worst to best: a move right is support gained, left lost
    if before in order and after in order:
        return "gained" if order.index(after) > order.index(before) else "lost"
    return "changed"


def diff_tables(a: str | Path, b: str | Path) -> dict:
    """What changed between two saved support tables, per (catalog, op, backend, precision): support gained or
    lost ("not-implemented -> native"), rows added or removed, and the versions that differ. `regressions`
    counts support lost."""
    ta, tb = load_table(a), load_table(b)
    rows_a = {_table_key(r): r for r in ta["rows"]}
    rows_b = {_table_key(r): r for r in tb["rows"]}
    changed = []
    for key in sorted(set(rows_a) | set(rows_b)):
        x, y = rows_a.get(key), rows_b.get(key)
        if x is None or y is None:
            changed.append({"row": key, "kind": "added" if x is None else "removed",
                            "before": x and x.get("support"), "after": y and y.get("support"),
                            "detail": (y or x).get("detail", "")})
        elif x.get("support") != y.get("support"):
            changed.append({"row": key, "kind": _support_move(x.get("support"), y.get("support")),
                            "before": x.get("support"), "after": y.get("support"), "detail": y.get("detail", "")})
    va, vb = ta.get("versions") or {}, tb.get("versions") or {}
    versions = {k: (va.get(k), vb.get(k)) for k in sorted(set(va) | set(vb)) if va.get(k) != vb.get(k)}
    return {"a": str(a), "b": str(b), "changed": changed, "versions": versions,
            "regressions": sum(c["kind"] == "lost" for c in changed)}


def table_diff_lines(d: dict) -> list[str]:
    """diff_tables' answer as the lines `fpdiff diff` prints."""
    lines = [f"fpdiff diff {d['a']} {d['b']}: support tables"]
    lines += [f"  {k}: {x} -> {y}" for k, (x, y) in d["versions"].items()]
    for c in d["changed"]:
        detail = f"  ({c['detail']})" if c.get("detail") else ""
        lines.append(f"  {c['kind']:8s} {c['row']}: {c['before'] or '-'} -> {c['after'] or '-'}{detail}")
    if not d["changed"]:
        lines.append("  no (catalog, op, backend, precision) changed its support")
    return lines
