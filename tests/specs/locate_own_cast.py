"""A model whose own cast destroys its answer: a sum of near-equal large values taken after `.to(torch.bfloat16)`.
Its float64 reference must compute that sum in float64 (the cast widened), or the loss looks like the model's
meaning and no op is blamed; locate names the cast."""
import torch
from torch import nn


class M(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        h = self.lin(x) + 100.0
        h = h.to(torch.bfloat16)  # the model's own narrowing: bf16 keeps 8 bits of a value near 100
        return (h.float() - 100.0).sum(-1)


def model():
    return M()


def inputs():
    return (torch.randn(4, 16),)
