"""--resume RUN.json: what a cut run judged is kept and not run again, the rest runs, and the merged result equals
a straight run; a file that is not an ops report of the same selection is one line and exit 2."""
import json
import subprocess
import sys

import pytest

from fpdiff import api
from fpdiff.core.jsonfile import dump

pytestmark = pytest.mark.slow

KW = {"catalogs": ["torch"], "variants": [], "backends": ["torch"], "precisions": ["fp32", "fp16"],
      "repro_dir": None, "recheck": False}


def _cells(result) -> dict:
    return {(c.case, c.backend, c.precision, c.shape_variant): str(c.status) for c in result.cells}


def _ran(**kw) -> tuple:
    """The result and the case ids the run judged itself (its progress ticks one per case)."""
    seen: list[str] = []
    result = api.ops(**KW, **kw, progress=lambda what, done, total: seen.append(what))
    return result, set(seen)


def test_resume_keeps_what_the_cut_run_judged_and_runs_the_rest(tmp_path):
    first, _ = _ran(patterns=["add", "exp"])
    report = tmp_path / "run.json"
    dump(first.as_dict(), report)
    straight = api.ops(**KW, patterns=["add", "exp", "tanh", "mul"])
    resumed, ran = _ran(patterns=["add", "exp", "tanh", "mul"], resume=str(report))
    assert _cells(resumed) == _cells(straight)
    assert resumed.resumed == len({c.case for c in first.cells}) == 2
    assert not ran & {c.case for c in first.cells}  # the first run's cases were not run again
    assert {c.case for c in resumed.cells} - {c.case for c in first.cells} <= ran
    assert resumed.as_dict()["resumed"] == 2


def test_a_run_cut_by_its_budget_is_finished_by_resume(tmp_path):
    cut = api.ops(**KW, patterns=["add", "exp"], time_budget=0.001)
    assert cut.unrun and not cut.cells
    report = tmp_path / "cut.json"
    dump(cut.as_dict(), report)
    done = api.ops(**KW, patterns=["add", "exp"], resume=str(report))
    assert done.resumed == 0 and not done.unrun and {c.case for c in done.cells} == {"add#0", "exp#0"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fpdiff", "ops", "--catalog", "torch", "--ops", "add",
                           "--variants", "sample", "--backends", "torch", "--precisions", "fp32", "--no-repro",
                           *args], capture_output=True, text=True, timeout=300)


def test_bad_resume_files_are_one_line_and_exit_2(tmp_path):
    other = tmp_path / "check.json"
    other.write_text(json.dumps({"kind": "check", "cells": []}))
    wider = tmp_path / "wider.json"
    wider.write_text(json.dumps({"kind": "ops", "cells": [], "selection": {"backends": ["torch", "ort"],
                                                                          "precisions": ["fp32"]}}))
    for path, words in ((tmp_path / "missing.json", "cannot read"), (other, "not an ops report"),
                        (wider, "same --backends")):
        r = _cli("--resume", str(path))
        assert r.returncode == 2, r.stderr
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and words in lines[0], r.stderr
