"""What every loader shares: whether a fresh worker can import a module by name, and a model's name as its user
knows it."""
import sys
import types

from fpdiff.sources.base import display_name, importable


def test_a_module_a_worker_cannot_import_by_name_is_told_apart():
    assert importable("torch.nn") and importable("json") and importable("sys")
    assert not importable("__main__")
    made_up = types.ModuleType("fpdiff_spec_0123456789abcdef0123")  # a spec, imported from its file by fpdiff
    sys.modules[made_up.__name__] = made_up
    try:
        assert not importable(made_up.__name__)
    finally:
        del sys.modules[made_up.__name__]


def test_a_module_held_in_python_is_named_by_its_class():
    assert display_name("fpdiff-out/modules/Net-5c5bd5e28c90/spec.py") == \
        "Net (a module held in Python: fpdiff-out/modules/Net-5c5bd5e28c90/spec.py)"
    for label in ("example:tinycnn", "model.onnx", "specs/net.py", "hf:bert", "modules/Net-short/spec.py"):
        assert display_name(label) == label
