"""Mixed modules: the low precision except chosen ops, in eager and under torch.compile."""
import pytest
import torch

from conftest import SPECS
from fpdiff.core.errors import UsageError
from fpdiff.model import mixed
from fpdiff.model.mixed import fp32_module
from fpdiff.sources import load


def _src(name):
    s = load(name)
    return s, fp32_module(s.module, s.inputs)


def _rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def test_nothing_kept_is_the_whole_model_cast():
    s, gm = _src("example:tinyformer")
    with torch.no_grad():
        ours = mixed.apply(gm, frozenset(), torch.float16)(*s.inputs)
        half = s.module.half()(*(t.half() if t.is_floating_point() else t for t in s.inputs))
    assert ours.dtype == torch.float32  # fp32 out, like the model
    assert _rel(ours, half) < 1e-3


def test_everything_kept_is_fp32():
    s, gm = _src("example:tinycnn")
    names = {n.name for n in mixed.units(gm)}
    with torch.no_grad():
        ours = mixed.apply(gm, names, torch.float16)(*s.inputs)
        ref = gm(*s.inputs)
    assert _rel(ours, ref) < 1e-6


def test_kept_ops_compute_in_fp32_and_their_neighbours_do_not():
    s, gm = _src("example:rmsnorm")  # x*x overflows fp16; its mean (~2e4) fits, but not its input
    with torch.no_grad():
        square_only = mixed.apply(gm, {"mul"}, torch.float16)(*s.inputs)
        square_and_mean = mixed.apply(gm, {"mul", "mean"}, torch.float16)(*s.inputs)
        exact = s.module.double()(*(t.double() for t in s.inputs))
    assert _rel(square_only, exact) > 0.5  # mean at fp16 takes the fp32 square rounded: inf, rsqrt -> 0
    assert _rel(square_and_mean, exact) < 1e-2


def test_weights_are_stored_in_the_dtype_their_ops_compute_in():
    s, gm = _src("example:tinyformer")
    linears = [n.name for n in mixed.units(gm) if "linear" in n.name]
    m = mixed.apply(gm, {linears[0]}, torch.float16)
    dtypes = {p.dtype for p in m.parameters()}
    assert dtypes == {torch.float16, torch.float32}


@pytest.mark.slow
def test_compiles_with_inductor():
    s, gm = _src(str(SPECS / "demod_underflow.py"))
    m = mixed.apply(gm, {"mul", "sum_1", "rsqrt"}, torch.float16)
    with torch.no_grad():
        eager = m(*s.inputs)
        torch._dynamo.reset()
        compiled = torch.compile(m)(*s.inputs)
    assert _rel(compiled, eager) < 2e-3


def test_unknown_op_is_refused():
    _, gm = _src("example:tinycnn")
    with pytest.raises(UsageError, match="not an op of this model"):
        mixed.apply(gm, {"no_such_node"}, torch.float16)
