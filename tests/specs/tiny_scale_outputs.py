"""Outputs near 1e-165: a linear layer scaled by a float64 buffer. Squares of such values underflow to 0, so a
norm of raw values reads an all-zero output as exact; fp32/fp16 cannot hold them at all (they flush to zero)."""
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 32)
        self.register_buffer("scale", torch.tensor(1e-165, dtype=torch.float64))

    def forward(self, x):
        return torch.tanh(self.lin(x)) * self.scale


def model():
    return M()


def inputs():
    return (torch.randn(8, 16),)
