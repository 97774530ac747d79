"""A float64 model whose explicit float32 cast destroys its answer: (h + s) - h with |h| ~ 1e4 and s ~ 1e-4 is s to
about 1e-8 relative in float64, while in float32 (unit roundoff 6e-8 of 1e4 is 6e-4, more than s) nothing of s is
left. The float64 judge must compute the model's `.float()` in float64 and give s."""
import torch
from torch import nn

OFFSET = 1e4  # |h|: float32 spacing there is 1e-3, ten times the small term


class Cancel(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.small = nn.Parameter(torch.linspace(1e-4, 2e-4, d, dtype=torch.float64))

    def forward(self, x):
        h = x + OFFSET
        return ((h.float() + self.small.float()) - h.float()).to(x.dtype)  # the cast the judge must not follow


def model():
    return Cancel()


def inputs():
    return (torch.randn(4, 8),)
