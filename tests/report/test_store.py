"""The run history: runs land whole or not at all, side by side, and diff names regressions."""
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from fpdiff.analyses.check import check_cells
from fpdiff.analysis.check import Cell, CheckResult
from fpdiff.cli import main
from fpdiff.core.errors import UsageError
from fpdiff.report import store


def result(model="example:tinycnn", iree_status="pass", iree_err=1e-3, ncells=4):
    cells = [Cell("torch", "cpu", "fp16", "static", "pass", "ok", metrics={"rel_l2": 4e-4, "max_norm": 1e-3}),
             Cell("iree", "cpu", "fp16", "static", iree_status, "why", metrics={"rel_l2": iree_err, "max_norm": 1e-2})]
    cells += [Cell("ort", "cpu", f"p{i}", "static", "pass", "ok") for i in range(ncells - 2)]
    return CheckResult(model, cells, {}, {"iree-base-compiler": "3.13.0"}, 1.0, fingerprint="abc")


def test_diff_names_a_worse_verdict_and_a_grown_error(tmp_path, capsys):
    db = tmp_path / "h.sqlite"
    a = store.save_result(result(), db, {}, 0, check_cells)
    b = store.save_result(result(iree_err=1e-2), db, {}, 0, check_cells)  # 10x the error, same verdict
    c = store.save_result(result(iree_status="mismatch"), db, {}, 1, check_cells)
    assert store.diff(db, a, a, ["check"])["changed"] == []
    grown = store.diff(db, a, b, ["check"])
    assert grown["regressions"] == 1 and grown["changed"][0]["cell"] == "iree/cpu/fp16/static"
    worse = store.diff(db, a, c, ["check"])
    assert worse["regressions"] == 1 and worse["changed"][0]["after"] == "mismatch"
    assert store.diff(db, c, a, ["check"])["changed"][0]["kind"] == "improvement"
    assert main(["diff", str(a), str(c), "--store", str(db)]) == 1
    assert "regression  iree/cpu/fp16/static: pass -> mismatch" in capsys.readouterr().out
    assert main(["diff", str(c), str(a), "--store", str(db)]) == 0
    capsys.readouterr()
    assert main(["history", "example:tinycnn", "--store", str(db)]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3


@pytest.mark.parametrize("make, words", [
    ("newer", "has schema 99, this fpdiff reads 1"),
    ("garbage", "is not an fpdiff history"),
    ("other-models", "are of different models"),
    ("missing-run", "no run 7"),
])
def test_bad_histories_are_one_line_exit_2_and_lose_nothing(tmp_path, capsys, make, words):
    db = tmp_path / "h.sqlite"
    store.save_result(result(), db, {}, 0, check_cells)
    if make == "newer":
        con = sqlite3.connect(db)
        con.execute("UPDATE meta SET value='99' WHERE key='schema'")
        con.commit()
        con.close()
    elif make == "garbage":
        db.unlink()
        for extra in (tmp_path / "h.sqlite-wal", tmp_path / "h.sqlite-shm"):
            extra.unlink(missing_ok=True)
        db.write_bytes(b"this is not sqlite at all" * 100)
    elif make == "other-models":
        store.save_result(result(model="other.onnx"), db, {}, 0, check_cells)
    before = db.read_bytes()
    argv = ["diff", "1", "2" if make == "other-models" else "7", "--store", str(db)] if make in (
        "other-models", "missing-run") else ["history", "--store", str(db)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err
    assert db.read_bytes() == before


def test_a_locked_history_is_said_not_waited_on_forever(tmp_path, monkeypatch):
    db = tmp_path / "h.sqlite"
    store.save_result(result(), db, {}, 0, check_cells)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(store, "LOCK_TIMEOUT", 0.5)
    with pytest.raises(UsageError, match="another run holds it"):
        store.save_result(result(), db, {}, 0, check_cells)
    holder.execute("ROLLBACK")
    holder.close()


WRITER = '''
import sys
from fpdiff.analyses.check import check_cells
from fpdiff.analysis.check import Cell, CheckResult
from fpdiff.report import store
cells = [Cell("b%d" % i, "cpu", "fp16", "static", "pass", "x" * 2000) for i in range({n})]
for _ in range({runs}):
    store.save_result(CheckResult("m", cells, {{}}, {{}}, 1.0), __import__("pathlib").Path(sys.argv[1]), {{}}, 0,
                      check_cells)
'''


def _complete(db, n):
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    per_run = con.execute("SELECT runs.id, COUNT(cells.run) FROM runs LEFT JOIN cells ON cells.run = runs.id "
                          "GROUP BY runs.id").fetchall()
    con.close()
    assert all(count == n for _, count in per_run), per_run
    return len(per_run)


def test_a_run_killed_mid_write_leaves_only_whole_runs(tmp_path):
    db, script = tmp_path / "h.sqlite", tmp_path / "writer.py"
    script.write_text(WRITER.format(n=400, runs=100000))
    p = subprocess.Popen([sys.executable, str(script), str(db)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not db.exists() or db.stat().st_size < 1_000_000):
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    assert _complete(db, 400) > 0  # some runs landed, each with all of its cells
    assert store.save_result(result(), db, {}, 0, check_cells) > 0  # and the store takes the next run


def test_two_runs_at_once_both_land(tmp_path):
    db, script = tmp_path / "h.sqlite", tmp_path / "writer.py"
    script.write_text(WRITER.format(n=50, runs=30))
    procs = [subprocess.Popen([sys.executable, str(script), str(db)]) for _ in range(2)]
    assert [p.wait(120) for p in procs] == [0, 0]
    assert _complete(db, 50) == 60
