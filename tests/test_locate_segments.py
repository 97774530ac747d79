"""locate on compiled and plugin backends: bisection over standalone segments names the corrupted op."""
import pytest

import fpdiff
from conftest import PLUGINS

PLUGIN = (str(PLUGINS / "perturb.py"),)


@pytest.mark.parametrize("model,backend,module", [
    ("example:tinyformer", "perturb", "mlp.0"),
    ("example:tinyformer", "perturb-qkv", "qkv"),
    ("example:tinycnn", "perturb", "features.0"),
    ("example:tinycnn", "perturb-last", "head"),
])
def test_a_corrupted_op_is_named(model, backend, module):
    r = fpdiff.locate(model, backend=backend, precision="fp32", plugins=PLUGIN)
    seg = r.segment
    assert seg is not None and seg["status"] == "mismatch"
    assert seg["end"] - seg["start"] == 1, seg  # down to one op
    assert seg["module"] == module, seg
    assert r.compiles <= 2 * len(r.ops).bit_length() + 2


def test_tinyformer_first_corrupted_of_two_is_found_first():
    r = fpdiff.locate("example:tinyformer", backend="perturb-last", precision="fp32", plugins=PLUGIN)
    assert r.segment["module"] == "proj"  # proj comes before mlp.2 in graph order


@pytest.mark.parametrize("backend", ["ort", "iree", "honest"])
def test_healthy_backend_gets_no_culprit_with_one_compile(backend):
    r = fpdiff.locate("example:tinycnn", backend=backend, precision="fp32", plugins=PLUGIN)
    assert r.segment is None and r.compiles == 1
