"""A small residual MLP: blocks of LayerNorm -> Linear -> GELU -> Linear with a residual add, widths 24 to 48,
batch 8. OpenVINO's CPU plugin compiled it at f32 only when fpdiff's worker did not crash inside compile_model."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.norm, self.up, self.act, self.down = nn.LayerNorm(d), nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class ResidualMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(24, 32)
        self.blocks = nn.Sequential(Block(32, 48), Block(32, 24), Block(32, 48))
        self.head = nn.Linear(32, 24)

    def forward(self, x):
        return self.head(self.blocks(self.inp(x)))


def model():
    torch.manual_seed(0)
    return ResidualMLP()


def inputs():
    return (torch.randn(8, 24),)
