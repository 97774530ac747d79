"""A branch on the dtype and on the data, as BART's encoder layer clamps fp16 activations
(`if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all()`): torch.export cannot
trace it at fp16 (a data-dependent guard), while fp32 never reaches the data test."""
import torch
from torch import nn


class M(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        if h.dtype == torch.float16 and not torch.isfinite(h).all():
            h = torch.clamp(h, -6e4, 6e4)
        return torch.relu(h)


def model():
    return M()


def inputs():
    return (torch.randn(2, 8),)
