"""The Python API: every name it offers is reachable from the package, and its bad inputs are one typed line."""

from pathlib import Path

import pytest
import torch

import fpdiff
from fpdiff import api
from fpdiff.core.errors import UsageError
from fpdiff.sources.module import MODULES_DIR


def test_the_package_hands_on_every_name_of_the_api():
    assert sorted(fpdiff.__all__) == sorted(api.__all__)
    for name in api.__all__:
        assert getattr(fpdiff, name) is getattr(api, name), name


def test_rejudge_refuses_what_it_cannot_judge_again_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="takes a check's JSON report; this one is the report of fpdiff plan"):
        fpdiff.rejudge({"kind": "plan", "model": "m"})
    with pytest.raises(UsageError, match="holds no evidence"):
        fpdiff.rejudge({"kind": "check", "model": "m", "cells": []})
    with pytest.raises(UsageError, match="another form"):
        fpdiff.rejudge({"kind": "check", "model": "m", "cells": [], "evidence": {"form": 99}})
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="is not JSON"):
        fpdiff.rejudge(bad)
    with pytest.raises(UsageError, match="cannot read"):
        fpdiff.rejudge(tmp_path / "missing.json")


@pytest.mark.slow  # one torch job in another interpreter
def test_routes_given_to_one_run_hold_for_that_run_only():
    import sys
    with pytest.raises(UsageError, match="torch@other"):
        fpdiff.check("example:tinycnn", backends=["torch@other"], precisions=["fp32"])
    r = fpdiff.check("example:tinycnn", backends=["torch@other"], precisions=["fp32"], repro_dir=None,
                     routes=fpdiff.Routes(python={"torch@other": sys.executable}))
    assert [(c.backend, c.status) for c in r.cells] == [("torch@other", "pass")]
    assert "routes" in str(__import__("inspect").signature(fpdiff.check))
    with pytest.raises(UsageError, match="torch@other"):  # the route did not outlive its run
        fpdiff.check("example:tinycnn", backends=["torch@other"], precisions=["fp32"])


class Mlp(torch.nn.Module):
    """A module defined in a test file: its workers import the class from here."""
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(8, 32), torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.down(torch.nn.functional.gelu(self.up(x)))


@pytest.mark.slow  # workers export and run the module
def test_a_module_held_in_python_is_checked_located_and_planned(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    m, x = Mlp().eval(), torch.randn(4, 8)
    r = fpdiff.check(m, inputs=(x,), backends=["torch", "ort"], precisions=["fp32", "fp16"], repeat=1)
    assert {str(c.status) for c in r.cells} == {"pass"}, [(c.backend, c.precision, c.reason) for c in r.cells]
    spec = Path(r.model)
    assert spec.parent.parent == tmp_path / MODULES_DIR or spec.parent.parent.resolve() == (tmp_path / MODULES_DIR)
    loc = fpdiff.locate(m, inputs=x, precision="fp16")
    assert loc.ops and loc.output_error is not None and loc.output_error < 1e-2
    plan = fpdiff.plan(m, inputs=[x], precision="fp16", measure_speed=False)
    assert plan.passed and not plan.kept
    assert fpdiff.ranges(m, inputs=x).model == r.model  # the same module and inputs: the same spec


def test_a_model_the_api_cannot_take_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="MODEL is a spec .py file.*not object"):
        fpdiff.check(object())
    with pytest.raises(UsageError, match=r"check\(module\) needs the module's example inputs"):
        fpdiff.check(Mlp())
    with pytest.raises(UsageError, match="not list"):
        fpdiff.locate(Mlp(), inputs=[[1.0]])
    with pytest.raises(UsageError, match="ranges reads no inputs file"):
        fpdiff.ranges("example:tinycnn", inputs="x.npz")

    class Local(torch.nn.Module):  # defined in a function: pickle cannot find its class again
        def forward(self, x):
            return x
    with pytest.raises(UsageError, match="cannot hand Local to its workers.*write a spec file"):
        fpdiff.check(Local(), inputs=torch.ones(2))
