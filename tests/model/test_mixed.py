"""Mixed modules: the model as cast to a low precision except chosen ops, in eager and under torch.compile."""
import copy

import pytest
import torch

from conftest import SPECS
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.model import mixed
from fpdiff.sources import load

FP16 = prec.get("fp16")


def _src(name):
    s = load(name)
    return s, mixed.program_module(s.module, s.inputs, FP16)


def _rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def _half(s):
    with torch.no_grad():
        return copy.deepcopy(s.module).half()(*(t.half() if t.is_floating_point() else t for t in s.inputs))


def test_nothing_kept_is_the_whole_model_cast():
    s, gm = _src("example:tinyformer")
    with torch.no_grad():
        ours = mixed.apply(gm, frozenset(), torch.float16)(*s.inputs)
    assert ours.dtype == torch.float32  # fp32 out, like the model
    assert torch.equal(ours, _half(s).float())  # the program check runs at fp16, bit for bit


def test_everything_kept_is_fp32():
    s, gm = _src("example:tinycnn")
    names = {n.name for n in mixed.units(gm)}
    with torch.no_grad():
        ours = mixed.apply(gm, names, torch.float16)(*s.inputs)
        ref = s.module.float()(*s.inputs)
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
    w = next(p for p in m.parameters() if p.dtype == torch.float32)
    assert any(torch.equal(w, p.float()) for p in s.module.float().parameters())  # the model's own fp32 values


def test_rotary_decoder_runs_with_any_one_op_kept():
    """transformers' Llama at fp16: RMSNorm's .to(torch.float32) and .to(input_dtype), rotary code under no_grad
    with autocast disabled and its .to(x.dtype). Every unit kept alone gives a program that runs (each used to
    fail torch's dtype asserts or a same-dtype check), and none kept is the model as cast, bit for bit."""
    s, gm = _src(str(SPECS / "plan_rotary_llama.py"))
    assert not any("wrap_with" in str(n.target) for n in gm.graph.nodes)  # mode subgraphs inlined
    names = [n.name for n in mixed.units(gm)]
    assert any(mixed.op_name(n.target) in ("to", "_to_copy") for n in mixed.units(gm))  # .to(x.dtype): a unit
    with torch.no_grad():
        assert torch.equal(mixed.apply(gm, frozenset(), torch.float16)(*s.inputs), _half(s).float())
        for name in names:
            assert torch.isfinite(mixed.apply(gm, {name}, torch.float16)(*s.inputs)).all(), name
        everything = mixed.apply(gm, set(names), torch.float16)(*s.inputs)
        fp32 = s.module.float()(*s.inputs)
    assert _rel(everything, fp32) < 1e-5  # all fp32 but what the cast model rounds (its rotary buffer)


def test_a_kept_cast_to_the_low_dtype_keeps_fp32():
    """`.to(dtype)` of the model is `.to(torch.float16)` in its program at fp16; kept, it is a cast to fp32."""
    s, gm = _src(str(SPECS / "explicit_float.py"))
    back = [n.name for n in mixed.units(gm) if mixed.op_name(n.target) in ("to", "_to_copy")]
    assert back  # the norm's cast back to its input's dtype
    m = mixed.apply(gm, set(back), torch.float16)
    cast = next(n for n in m.graph.nodes if n.name == back[0])
    assert torch.float32 in cast.args and torch.float16 not in cast.args


def test_fp16_only_branch_stays_in_the_program():
    """A branch the model takes only at fp16 is in the plan's program, kept ops or not: the clamp cuts at 100."""
    s, gm = _src(str(SPECS / "plan_fp16_clamp.py"))
    assert any(mixed.op_name(n.target) == "clamp" for n in mixed.units(gm))
    everything = {n.name for n in mixed.units(gm)}
    with torch.no_grad():
        assert torch.equal(mixed.apply(gm, frozenset(), torch.float16)(*s.inputs), _half(s).float())
        out = mixed.apply(gm, everything, torch.float16)(*s.inputs)
        fp32 = s.module.float()(*s.inputs)
    assert out.abs().max() <= 100 < fp32.abs().max()


def test_a_model_not_exportable_at_the_precision_is_refused_with_its_line():
    s = load(str(SPECS / "plan_fp16_clamp_if_inf.py"))
    with pytest.raises(UsageError, match=r"cannot export this model at fp16 \(.*plan_fp16_clamp_if_inf.py:14\)"):
        mixed.program_module(s.module, s.inputs, FP16)


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


class _Bitcast(torch.nn.Module):
    """fp16 bits reinterpreted as int16 and back (as quantization and hashing code does): not a precision."""

    def forward(self, x):
        bits = x.view(torch.int16) & 0x7FFF  # |x| by clearing the sign bit
        return bits.view(x.dtype) * 2


def test_a_bitcast_is_neither_a_unit_nor_a_move():
    x = torch.randn(8)
    gm = mixed.program_module(_Bitcast(), (x,), FP16)
    assert [mixed.op_name(n.target) for n in mixed.units(gm)] == ["mul"]
    with torch.no_grad():
        for keep in (frozenset(), {"mul"}):
            assert torch.allclose(mixed.apply(gm, keep, torch.float16)(x), x.half().abs().float() * 2)


class _NestedModes(torch.nn.Module):
    """A rotary-like table under no_grad with autocast off (two nested mode subgraphs), cast to x's dtype."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.register_buffer("freq", torch.linspace(0.1, 1, 8), persistent=False)

    def forward(self, x):
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            table = (self.freq.float() * torch.arange(8, dtype=torch.float32)).cos()
        return self.lin(x) * table.to(x.dtype)


def test_nested_mode_subgraphs_are_inlined_and_their_ops_run_as_the_program_has_them():
    m, x = _NestedModes(), torch.randn(2, 8)
    gm = mixed.program_module(m, (x,), FP16)
    assert not any("wrap_with" in str(n.target) for n in gm.graph.nodes)
    names = [n.name for n in mixed.units(gm)]
    assert len(names) == 3  # linear, the table's cast to fp16, the product; the table itself is fp32 by the model
    with torch.no_grad():
        assert torch.equal(mixed.apply(gm, frozenset(), torch.float16)(x), copy.deepcopy(m).half()(x.half()).float())
        assert _rel(mixed.apply(gm, set(names), torch.float16)(x), m.float()(x)) < 1e-3  # the fp16 freq buffer


class _Gated(torch.nn.Module):
    """A gated unit as MoE experts and SwiGLU write it: one projection split in two with chunk."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 16)

    def forward(self, x):
        gate, up = self.lin(x).chunk(2, dim=-1)
        return torch.nn.functional.silu(gate) * up


def test_a_split_into_a_tuple_is_a_move():
    m, x = _Gated(), torch.randn(2, 8)
    gm = mixed.program_module(m, (x,), FP16)
    assert [mixed.op_name(n.target) for n in mixed.units(gm)] == ["linear", "silu", "mul"]
    with torch.no_grad():
        assert _rel(mixed.apply(gm, {"linear"}, torch.float16)(x), m(x)) < 2e-3


class _T5Norm(torch.nn.Module):
    """T5's layer norm: statistics in fp32, the fp16 input times an fp32 rsqrt (fp32 by promotion), cast back to
    the weight's dtype when that is fp16 (a dtype-dependent branch)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.weight = torch.nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        h = self.lin(x)
        var = h.to(torch.float32).pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(var + 1e-6)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            h = h.to(self.weight.dtype)
        return self.weight * h


def test_a_kept_value_enters_the_models_own_fp32_arithmetic_unrounded():
    m, x = _T5Norm(), torch.randn(4, 16)
    gm = mixed.program_module(m, (x,), FP16)
    everything = {n.name for n in mixed.units(gm)}
    with torch.no_grad():
        assert torch.equal(mixed.apply(gm, frozenset(), torch.float16)(x), copy.deepcopy(m).half()(x.half()).float())
        assert _rel(mixed.apply(gm, everything, torch.float16)(x), m(x)) < 1e-6  # was 2e-4: h rounded to fp16


class _Tied(torch.nn.Module):
    """An embedding and an output projection sharing one weight (T5, GPT-2 and most language models tie them)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(32, 16)
        self.head = torch.nn.Linear(16, 32, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.emb(ids)))


def test_tied_weights_are_read_in_fp32_under_every_name():
    m, ids = _Tied(), torch.randint(0, 32, (2, 5))
    gm = mixed.program_module(m, (ids,), FP16)
    with torch.no_grad():
        everything = mixed.apply(gm, {n.name for n in mixed.units(gm)}, torch.float16)(ids)
        assert torch.equal(everything, m(ids))  # every op in fp32 on the model's own fp32 weights
