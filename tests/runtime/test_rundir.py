"""Temporary files live under one run directory, removed at the end unless --keep-temp."""
import os
import subprocess
import sys

import pytest

from fpdiff.runtime import rundir


def ours(tmp):
    """fpdiff's entries in a temp dir (torch and other components keep their own caches there)."""
    return [p for p in tmp.iterdir() if p.name.startswith("fpdiff-")]


def fpdiff_cli(*args, tmp):
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop(rundir.ENV, None)
    return subprocess.run([sys.executable, "-m", "fpdiff", *args], capture_output=True, text=True, env=env)


def test_nested_runs_share_the_outer_directory_and_it_is_removed(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.delenv(rundir.ENV, raising=False)
    with rundir.run_directory() as outer:
        inner_file = rundir.mkdtemp("x-") / "f"
        inner_file.write_text("1")
        with rundir.run_directory() as inner:
            assert inner == outer
        assert inner_file.exists()  # the inner run does not remove what the outer owns
    assert not outer.exists() and list(tmp_path.iterdir()) == []
    assert rundir.ENV not in os.environ


def test_kept_directory_stays(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.delenv(rundir.ENV, raising=False)
    with rundir.run_directory(keep=True) as d:
        (d / "f").write_text("1")
    assert (d / "f").exists()


@pytest.mark.slow
def test_check_leaves_nothing_behind_unless_asked(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    args = ("check", "example:rmsnorm", "--backends", "torch,ort", "--precisions", "fp32", "--no-cache")
    r = fpdiff_cli(*args, tmp=scratch)
    assert r.returncode == 0, r.stderr
    assert ours(scratch) == []
    r = fpdiff_cli("--keep-temp", *args, tmp=scratch)
    assert r.returncode == 0 and "temporary files kept in" in r.stderr
    kept = ours(scratch)
    assert len(kept) == 1 and any(p.suffix == ".pt" for p in kept[0].rglob("*"))  # the run's saved inputs


@pytest.mark.slow
def test_unwritable_json_path_is_one_line_after_the_table(tmp_path):
    r = fpdiff_cli("check", "example:rmsnorm", "--backends", "torch", "--precisions", "fp32",
                   "--json", "/proc/no/report.json", tmp=tmp_path)
    assert r.returncode == 2
    assert "torch" in r.stdout  # the grid was shown first: nothing lost
    assert r.stderr.strip().splitlines() == ["fpdiff: error: cannot write JSON to /proc/no/report.json: "
                                             "No such file or directory"]
