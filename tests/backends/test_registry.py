"""The registry: built-ins come through the entry-point group, plugins through a file, both the same way; every
declaration a backend class sets is one fpdiff reads, or registration refuses it."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import PLUGINS, builtin_backends
from fpdiff.backends import NO_AUTOLOAD, cross_check_for, judge_for, registry
from fpdiff.backends.base import DECLARATIONS, Backend
from fpdiff.core.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def test_builtins_register_through_entry_points():
    reg = registry()
    assert {"torch", "ort", "onnxref"} <= builtin_backends() <= set(reg.names())
    assert not set(reg.skipped) & builtin_backends()


def plugin(tmp_path: Path, body: str) -> str:
    """A plugin file defining one Backend subclass with `body` as its class body."""
    p = tmp_path / "plug.py"
    p.write_text("from fpdiff.backends.base import Backend, Prepared\n\n\nclass Plug(Backend):\n    name = 'plug'\n"
                 + textwrap.indent(textwrap.dedent(body), "    ")
                 + "\n    def prepare_task(self, task):\n        return Prepared(lambda *xs: xs)\n")
    return str(p)


@pytest.mark.parametrize("body, words", [
    ("all_output = True\n", "'all_output' is no backend declaration; the declarations are artifacts, cross_checks, "),
    ("shape_variant = False\n", "'shape_variant' is no backend declaration"),
    ("all_outputs = True\n", "'all_outputs' was removed (implement prepare_marked)"),
    ("reference = True\n", "'reference' was removed"),
    ("runs_modules = True\n", "'runs_modules' was removed"),
    ("verifies_onnx_plans = True\n", "'verifies_onnx_plans' was removed"),
])
def test_a_declaration_fpdiff_would_not_read_is_refused_at_registration(tmp_path, body, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")) as e:
        registry([plugin(tmp_path, body)])
    assert "plug" in str(e.value)


def test_a_backend_keeps_its_own_constants_private_names_and_methods(tmp_path):
    body = """
    kinds = frozenset({"torch"})
    takes_flags = True
    TABLE = {"a": 1}
    _cache = {}

    @property
    def label(self):
        return self.name

    @staticmethod
    def helper():
        return 1
    """
    reg = registry([plugin(tmp_path, body)])
    assert reg.cls("plug").takes_flags and reg.cls("plug").TABLE == {"a": 1}


def test_a_subclass_of_a_builtin_is_checked_too(tmp_path):
    p = tmp_path / "sub.py"
    p.write_text("from fpdiff.backends.ort import OrtBackend\n\n\nclass Sub(OrtBackend):\n    name = 'sub'\n"
                 "    cross_checks = frozenset()\n    independant = True\n")
    with pytest.raises(UsageError, match="'independant' is no backend declaration"):
        registry([str(p)])


def test_the_minimal_form_takes_no_declarations(tmp_path):
    p = tmp_path / "minimal.py"
    p.write_text("class B:\n    name = 'b'\n    shape_variants = False\n    def available(self): return None\n"
                 "    def prepare(self, program, precision, device): return None\n")
    with pytest.raises(UsageError, match=r"minimal plugin form takes no declarations \(shape_variants\)"):
        registry([str(p)])


def test_judges_and_cross_checks_are_declared_once_per_kind(tmp_path):
    assert (judge_for("torch"), judge_for("onnx"), cross_check_for("onnx"), cross_check_for("torch")) == \
        ("torch", "onnxref", "ort", None)
    reg = registry()
    assert {n for n in reg.names() if reg.cls(n).judges} == {"torch", "onnxref"}
    with pytest.raises(UsageError, match="declares judges 'torch', which 'torch'"):
        registry([plugin(tmp_path, "judges = frozenset({'torch'})\n")])
    with pytest.raises(UsageError, match="no backend judges tflite models"):
        reg.judge_for("tflite")


def test_implements_names_the_optional_lifecycle_methods_a_class_overrides():
    reg = registry()
    marks = {n for n in builtin_backends() if reg.cls(n).implements("prepare_marked")}
    assert marks == {"ort", "onnxref"}
    assert reg.cls("iree").implements("repro") and not reg.cls("onnxref").implements("repro")
    with pytest.raises(ValueError, match="not a lifecycle method"):
        Backend.implements("prepare_task_typo")


def test_a_missing_package_names_the_extra_that_installs_it():
    class Missing(Backend):
        name = "missing"
        requires = ("fpdiff_no_such_module",)
        extra = "ort"
    assert Missing().available() == "fpdiff_no_such_module does not import (pip install 'fpdiff[ort]')"


def test_every_builtin_that_needs_a_package_names_an_extra_fpdiff_has():
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    extras = set(tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"])
    reg = registry()
    for name in builtin_backends():
        cls = reg.cls(name)
        if cls.extra:
            assert cls.extra in extras, (name, cls.extra)
        assert cls.extra or cls.install_hint or not cls.requires or cls.requires[0].startswith("onnx"), name
    assert set(DECLARATIONS) >= {"judges", "cross_checks", "extra"}


def test_plugin_file_registers_every_backend_class_it_defines():
    reg = registry([str(PLUGINS / "perturb.py")])
    assert {"perturb", "honest"} <= set(reg.names())
    assert reg.create("honest").available() is None


def test_plugin_without_backend_class_is_a_clear_error(tmp_path):
    p = tmp_path / "empty.py"
    p.write_text("X = 1\n")
    with pytest.raises(UsageError, match="defines no backend class"):
        registry([str(p)])


def test_plugin_cannot_take_a_builtin_name(tmp_path):
    p = tmp_path / "clash.py"
    p.write_text("class B:\n    name = 'ort'\n    def available(self): return None\n"
                 "    def prepare(self, program, precision, device): return None\n")
    with pytest.raises(UsageError, match="already taken"):
        registry([str(p)])


def _third_party(tmp_path):
    """A package on PYTHONPATH whose entry points clash with a built-in, fail to import, or name no backend."""
    (tmp_path / "thirdparty_fp.py").write_text(
        "class Clash:\n    name = 'ort'\n    def available(self): return None\n"
        "    def prepare(self, program, precision, device): return None\n"
        "class NotABackend:\n    pass\n")
    info = tmp_path / "thirdparty_fp-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-fp\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[fpdiff.backends]\nclash = thirdparty_fp:Clash\n"
                                           "missing = thirdparty_fp_gone:B\nnotabackend = thirdparty_fp:NotABackend\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path)}


def test_broken_third_party_entry_points_are_skipped_with_one_line_each(tmp_path):
    env = _third_party(tmp_path)
    r = subprocess.run([sys.executable, "-m", "fpdiff", "backends"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 3, r.stderr
    assert any("clash" in ln and "already taken" in ln for ln in lines)
    assert any("missing" in ln and "No module named" in ln for ln in lines)
    assert any("notabackend" in ln and "is not a backend" in ln for ln in lines)
    assert "Traceback" not in r.stderr
    # the built-in keeps its name: the clashing class never replaced it
    listed = {ln.split()[0] for ln in r.stdout.splitlines()}
    assert builtin_backends() <= listed
    assert "clash" not in listed and "missing" not in listed


def test_autoload_off_leaves_third_party_entry_points_out(tmp_path):
    env = {**_third_party(tmp_path), NO_AUTOLOAD: "1"}
    r = subprocess.run([sys.executable, "-m", "fpdiff", "backends"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert builtin_backends() <= {ln.split()[0] for ln in r.stdout.splitlines()}


def test_asking_for_a_skipped_backend_says_why(tmp_path, monkeypatch):
    env = _third_party(tmp_path)
    r = subprocess.run([sys.executable, "-m", "fpdiff", "check", "example:tinycnn", "--backends", "missing"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert "missing = thirdparty_fp_gone:B skipped" in r.stderr.strip().splitlines()[-1]
