"""The registry: built-ins come through the entry-point group, plugins through a file, both the same way."""
import os
import subprocess
import sys

import pytest

from conftest import PLUGINS
from fpdiff.backends import NO_AUTOLOAD, registry
from fpdiff.core.errors import UsageError


def test_builtins_register_through_entry_points():
    assert {"torch", "inductor", "ort", "iree", "onnxref", "openvino"} <= set(registry().names())


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
    assert {"torch", "inductor", "ort", "iree", "onnxref", "openvino"} <= listed
    assert "clash" not in listed and "missing" not in listed


def test_autoload_off_leaves_third_party_entry_points_out(tmp_path):
    env = {**_third_party(tmp_path), NO_AUTOLOAD: "1"}
    r = subprocess.run([sys.executable, "-m", "fpdiff", "backends"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert {"torch", "ort", "iree"} <= {ln.split()[0] for ln in r.stdout.splitlines()}


def test_asking_for_a_skipped_backend_says_why(tmp_path, monkeypatch):
    env = _third_party(tmp_path)
    r = subprocess.run([sys.executable, "-m", "fpdiff", "check", "example:tinycnn", "--backends", "missing"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2
    assert "missing = thirdparty_fp_gone:B skipped" in r.stderr.strip().splitlines()[-1]
