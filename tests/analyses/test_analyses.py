"""Declarations are checked when they register: a wrong one is one line naming what is wrong."""
import dataclasses

import pytest

from fpdiff import analyses
from fpdiff.analyses import Analyses, Analysis
from fpdiff.core.errors import UsageError


@dataclasses.dataclass(frozen=True)
class Opts:
    level: int = 1


def run(model, options, shared):
    return None


def declared(**change) -> Analysis:
    return dataclasses.replace(Analysis(name="probe", summary="s", run=run, options=Opts, terminal=print,
                                        html=str), **change)


@pytest.mark.parametrize("change, said", [
    ({"name": "Check Me"}, "lower-case name"),
    ({"name": "cache"}, "not one of fpdiff's commands"),
    ({"options": dict}, "options must be a dataclass"),
    ({"shared": ("seed", "colour")}, "shared options it may not read: colour"),
    ({"shared": ("seed",), "defaults": {"timeout": 5}}, "shared options it may not read: timeout"),
    ({"run": lambda model: None}, "run must take (model, options, shared)"),
    ({"takes_model": False}, "run must take (options, shared)"),
    ({"html": "body"}, "html must be a function"),
])
def test_a_wrong_declaration_is_one_line(change, said):
    with pytest.raises(UsageError, match=None) as e:
        Analyses().register(declared(**change))
    assert said in str(e.value) and "\n" not in str(e.value)


def test_an_option_named_as_a_shared_one_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Clashing:
        seed: int = 0
    with pytest.raises(UsageError, match="options seed are shared options"):
        Analyses().register(declared(options=Clashing))


def test_a_name_taken_by_another_origin_is_refused():
    reg = Analyses()
    reg.register(declared(), "one")
    with pytest.raises(UsageError, match="already taken by one"):
        reg.register(declared(), "two")


def test_the_builtins_register_as_entry_points_and_unknown_names_list_them():
    assert [a.name for a in analyses.all_analyses()][:7] == sorted(["check", "locate", "ranges", "plan", "ops",
                                                                     "fuzz", "quant"])
    with pytest.raises(UsageError, match="no analysis 'nope'; the analyses: check"):
        analyses.get("nope")


def test_a_report_of_a_kind_no_analysis_renders_is_one_line():
    with pytest.raises(UsageError, match="kind 'other'; known: check"):
        analyses.html_page({"kind": "other"})


def test_the_api_function_splits_its_keywords_and_keeps_iree_flags_after_backend_flags():
    from fpdiff.api import function
    probe = declared(shared=("backend_flags", "timeout", "routes"), defaults={"timeout": 7.0},
                     run=lambda model, options, shared: (model, options, shared))
    model, options, shared = function(probe)("m", level=3, backend_flags={"iree": ["--a"]}, iree_flags=["--b"])
    assert model == "m" and options == Opts(level=3) and shared.timeout == 7.0
    assert shared.flags == {"iree": ("--a", "--b")} and shared.registry is not None
    with pytest.raises(TypeError, match="seed"):
        function(probe)("m", seed=1)  # not a shared option this analysis reads


def test_a_model_run_reads_every_shared_option():
    from fpdiff.analyses import MODEL_RUN
    from fpdiff.analysis.options import fields
    assert MODEL_RUN == fields()
