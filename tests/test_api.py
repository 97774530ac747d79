"""The Python API: every name it offers is reachable from the package, and its bad inputs are one typed line."""

import pytest

import fpdiff
from fpdiff import api
from fpdiff.core.errors import UsageError


def test_the_package_hands_on_every_name_of_the_api():
    assert sorted(fpdiff.__all__) == sorted(api.__all__)
    for name in api.__all__:
        assert getattr(fpdiff, name) is getattr(api, name), name


def test_rejudge_refuses_what_it_cannot_judge_again_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="takes a check's JSON report, and this one is a plan's"):
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
