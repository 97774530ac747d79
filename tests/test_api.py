"""The Python API: every name it offers is reachable from the package, and its bad inputs are one typed line."""

from pathlib import Path

import pytest
import torch

import fpdiff
from fpdiff import api
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.sources.module import MODULES_DIR


def test_the_package_hands_on_every_name_of_the_api():
    assert sorted(fpdiff.__all__) == sorted(api.__all__)
    for name in api.__all__:
        assert getattr(fpdiff, name) is getattr(api, name), name


def test_examples_is_one_thing_after_a_model_is_imported_from_it():
    from fpdiff.examples import tinycnn  # noqa: F401  (binds fpdiff.examples as Python binds a subpackage)
    assert fpdiff.examples is api.examples
    assert "tinycnn" in fpdiff.examples.names()


def test_rejudge_refuses_what_it_cannot_judge_again_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="JSON report of check, fuzz, ops; this one is the report of fpdiff plan"):
        fpdiff.rejudge({"kind": "plan", "model": "m"})
    with pytest.raises(UsageError, match="holds no evidence"):
        fpdiff.rejudge({"kind": "check", "model": "m", "cells": []})
    with pytest.raises(UsageError, match="sweep's report holds no evidence"):
        fpdiff.rejudge({"kind": "ops", "cells": []})
    with pytest.raises(UsageError, match="campaign's report holds no evidence"):
        fpdiff.rejudge({"kind": "fuzz", "records": []})
    with pytest.raises(UsageError, match="names rules 'other'"):
        fpdiff.rejudge({"kind": "ops", "cells": [], "evidence": [{"rules": "other", "form": 1}]})
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

    class Locked(torch.nn.Module):  # holds what no pickler carries: nothing can hand it to a worker
        def __init__(self) -> None:
            super().__init__()
            import threading
            self.lock = threading.Lock()

        def forward(self, x):
            return x
    with pytest.raises(UsageError, match="cannot hand Locked to its workers.*lock.*write a spec file.*.pt2"):
        fpdiff.check(Locked(), inputs=torch.ones(2))


@pytest.mark.slow
def test_a_class_no_worker_can_import_travels_by_value(tmp_path, monkeypatch):
    """A class defined in a function (pickle cannot find it again by name), holding a closure: its code goes to the
    workers with the module (a notebook cell's class, in __main__, is tests/test_notebook_kernel.py's)."""
    monkeypatch.chdir(tmp_path)

    def make(scale: float):
        return lambda t: torch.tanh(t) * scale

    class Local(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj, self.act = torch.nn.Linear(8, 8), make(0.5)

        def forward(self, x):
            return self.act(self.proj(x))
    r = fpdiff.check(Local(), inputs=torch.randn(2, 8), backends=["torch", "ort"], precisions=["fp32"])
    assert [c.status for c in r.cells] == [Status.PASS, Status.PASS], [c.reason for c in r.cells]


def test_the_api_forgives_what_people_type():
    """Comma strings for lists, torch's names and dtypes for precisions, progress=False; a slip of a keyword is one
    typed line naming the right one, no TypeError and no chained frames."""
    sig = api._signature(api.analyses.get("check"))
    given = api.forgiven("check", sig, ("m.py",), {"backends": "torch, ort", "precisions": [torch.float16, "half",
                                                                                            "bfloat16", "Float32"],
                                                   "progress": False})
    assert given["backends"] == ["torch", "ort"] and given["precisions"] == ["fp16", "bf16", "fp32"]
    assert given["progress"] is None
    with pytest.raises(UsageError, match="no option backend=; did you mean backends=") as e:
        fpdiff.check("example:tinycnn", backend="ort")
    assert e.value.__cause__ is None and e.value.__suppress_context__ and isinstance(e.value, TypeError)
    with pytest.raises(UsageError, match="no option precison=; did you mean precisions="):
        fpdiff.check("example:tinycnn", precison="fp16")
    with pytest.raises(UsageError, match="unknown precision 'float17'.*torch's names"):
        fpdiff.check("example:tinycnn", precisions="fp16,float17")
    loc = api.analyses.get("locate")
    assert api.forgiven("locate", api._signature(loc), ("m.py",), {"precision": torch.bfloat16})["precision"] == "bf16"


def test_the_command_line_takes_torchs_precision_names_too():
    from fpdiff.analyses.args import precision_name, precision_names
    assert precision_names("float16,bf16, torch.float32") == ["fp16", "bf16", "fp32"]
    assert precision_name("HALF") == "fp16"
