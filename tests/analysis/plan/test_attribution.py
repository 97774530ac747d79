"""Each op's first-order share of the pure fp16 error, from a real float64 pass and its gradient: the op whose own
rounding makes the error gets the largest share, and the shares account for the error to first order."""
import pytest
import torch

from fpdiff.analysis.plan.attribution import shares
from fpdiff.analysis.plan.torch_models import units_of
from fpdiff.core import precision as prec
from fpdiff.core.errors import NotAnalysable
from fpdiff.model.mixed import program_module

FP16 = prec.get("fp16")


class Cancels(torch.nn.Module):
    """(x + 300) - 300 at fp16 keeps x to 0.25 (fp16's spacing at 300); the scaling around it is exact."""

    def forward(self, x):
        y = x * 2.0
        z = (y + 300.0) - 300.0
        return torch.relu(z) + 0.5 * z


def test_the_op_that_loses_the_digits_has_the_largest_share():
    x = torch.linspace(-1.0, 1.0, 64)
    gm = program_module(Cancels(), (x,), FP16)
    share = shares(gm, (x,), FP16.dtype)
    assert set(share) == {u.node for u in units_of(gm)}
    # y + 300 rounds to fp16's 0.25 spacing there; the subtraction reads that rounded value, so keeping it in
    # fp32 alone takes the same error away (an op's share includes its inputs' rounding)
    assert share["add"] > 0.5 and share["sub"] > 0.5
    assert all(abs(share[n]) < 0.05 for n in share if n not in ("add", "sub"))  # exact in fp16 here


def test_a_pure_program_without_error_is_refused_in_one_line():
    x = torch.tensor([1.0, 2.0, 0.5])
    gm = program_module(torch.nn.ReLU(), (x,), FP16)
    with pytest.raises(NotAnalysable, match="not finite|exact"):
        shares(gm, (x,), FP16.dtype)


class Attention(torch.nn.Module):
    """Multi-head attention with a learned position bias as its mask (as T5 writes it): the traced kernel lays its
    output out so that `.transpose(1, 2).contiguous()` is no copy, while with the bias needing a gradient (the
    float64 pass) torch runs the math kernel, which lays it out otherwise."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(32, 96), torch.nn.Linear(32, 32)
        self.bias = torch.nn.Parameter(torch.randn(1, 4, 16, 16))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (t.view(b, s, 4, 8).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.bias * 1.0)
        return self.out(o.transpose(1, 2).contiguous().view(b, s, -1))


def test_attention_whose_float64_layout_differs_from_the_traced_one_is_attributed():
    torch.manual_seed(0)
    x = torch.randn(2, 16, 32)
    model = Attention()
    gm = program_module(model, (x,), FP16)
    share = shares(gm, (x,), FP16.dtype)
    assert set(share) == {u.node for u in units_of(gm)}
    assert max(abs(v) for v in share.values()) > 0.01  # the fp16 rounding is attributed to some op
