"""The registry: built-ins come through the entry-point group, plugins through a file, both the same way."""
import pytest

from conftest import PLUGINS
from fpdiff.backends import registry
from fpdiff.errors import UsageError


def test_builtins_register_through_entry_points():
    assert {"torch", "inductor", "ort", "iree", "onnxref"} <= set(registry().names())


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
