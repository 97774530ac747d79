"""An analysis added in one file and one entry point line shows in the CLI, the API and every report."""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def installed(tmp_path):
    """tests/plugins/toy_analysis.py as a package would install it: the file, and its entry point in metadata."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(HERE.parent / "plugins" / "toy_analysis.py", site)
    meta = site / "fpdiff_toy-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: fpdiff-toy\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text("[fpdiff.analyses]\ntoy = toy_analysis:TOY\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return env, tmp_path


def fpdiff(env, cwd, *args):
    return subprocess.run([sys.executable, "-m", "fpdiff", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_the_cli_runs_it_and_writes_every_report(installed):
    env, tmp = installed
    assert "toy" in fpdiff(env, tmp, "--help").stdout
    r = fpdiff(env, tmp, "toy", "example:tinycnn", "--scale", "2", "--seed", "3", "--loud", "--json", "r.json",
               "--html", "r.html", "--junit", "r.xml", "--store", "h.sqlite")
    assert r.returncode == 0, r.stderr
    assert "toy peak of example:tinycnn" in r.stdout and "(loud)" in r.stdout
    assert "next: fpdiff ranges example:tinycnn" in r.stdout
    report = json.loads((tmp / "r.json").read_text())
    assert report["kind"] == "toy" and report["seed"] == 3 and report["peak"] > 0
    assert "<p class='toy'>peak" in (tmp / "r.html").read_text()
    assert "<testcase classname=\"toy\"" in (tmp / "r.xml").read_text()
    with sqlite3.connect(tmp / "h.sqlite") as con:
        assert con.execute("SELECT kind FROM runs").fetchall() == [("toy",)]
        assert con.execute("SELECT backend, status FROM cells").fetchall() == [("toy", "pass")]
    assert "toy" in fpdiff(env, tmp, "history", "--store", "h.sqlite").stdout
    again = fpdiff(env, tmp, "report", "r.json", "-o", "again.html")
    assert again.returncode == 0 and "<p class='toy'>" in (tmp / "again.html").read_text()
    assert fpdiff(env, tmp, "toy", "example:tinycnn", "--limit", "0", "--no-store").returncode == 1
    bad = fpdiff(env, tmp, "toy", "example:tinycnn", "--timeout", "5")  # toy reads no timeout: not offered
    assert bad.returncode == 2 and "unrecognized arguments: --timeout" in bad.stderr


def test_the_api_hands_it_on_with_its_options_and_the_shared_ones(installed):
    env, tmp = installed
    code = ("import fpdiff, inspect\n"
            "assert 'toy' in fpdiff.__all__ and 'ToyResult' in fpdiff.__all__\n"
            "print(sorted(inspect.signature(fpdiff.toy).parameters))\n"
            "r = fpdiff.toy('example:tinycnn', scale=2.0, seed=3)\n"
            "one = fpdiff.toy('example:tinycnn', seed=3)\n"
            "assert isinstance(r, fpdiff.ToyResult) and r.seed == 3 and abs(r.peak - 2 * one.peak) < 1e-12\n"
            "try:\n    fpdiff.toy('example:tinycnn', timeout=5)\nexcept TypeError as e:\n    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "['inputs', 'limit', 'model', 'progress', 'scale', 'seed']" in r.stdout  # inputs: a module's tensors
    assert "refused:" in r.stdout and "timeout" in r.stdout


def test_a_broken_entry_point_is_skipped_with_its_reason_and_the_rest_still_work(installed):
    env, tmp = installed
    meta = next(Path(env["PYTHONPATH"].split(os.pathsep)[0]).glob("*.dist-info"))
    (meta / "entry_points.txt").write_text("[fpdiff.analyses]\ntoy = toy_analysis:MISSING\n")
    r = fpdiff(env, tmp, "--help")
    assert r.returncode == 0 and "check" in r.stdout and "toy" not in r.stdout.split("positional")[0]
    assert "analysis entry point toy = toy_analysis:MISSING skipped" in r.stderr
