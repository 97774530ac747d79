"""Each op's first-order share of the pure fp16 error, from a real float64 pass and its gradient: the op whose own
rounding makes the error gets the largest share, and the shares account for the error to first order."""
import pytest
import torch

from fpdiff.analysis.plan.attribution import shares
from fpdiff.analysis.plan.torch_models import units_of
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
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
    with pytest.raises(UsageError, match="not finite|exact"):
        shares(gm, (x,), FP16.dtype)
