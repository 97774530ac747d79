"""SEEDS #1: elementwise f64 arithmetic whose last bits matter (mul, round, sub)."""
import torch


class M(torch.nn.Module):
    def forward(self, a, b):
        p = a * b
        return p - torch.round(p)


def model():
    return M()


def inputs():
    return torch.rand(4, dtype=torch.float64) * 1e6, torch.rand(4, dtype=torch.float64) * 1e3
