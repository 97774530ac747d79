"""Shifted-window attention in miniature, as Swin and DeBERTa-v2 write it: torch.roll shifts a token grid, a size-1
dim is squeezed away (squeeze.dim), a masked softmax mixes each window, and the roll is undone. torch.export's
default decompositions turn the roll into an integer aten.fmod and the squeeze into aten.squeeze.dims, neither of
which iree-compile 3.13 lowers, while it lowers aten.roll and aten.squeeze.dim as they are."""
import torch
from torch import nn


class ShiftedWindow(nn.Module):
    def __init__(self, d: int = 16, grid: int = 8, window: int = 4) -> None:
        super().__init__()
        self.grid, self.window, self.shift = grid, window, window // 2
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.register_buffer("mask", torch.triu(torch.full((window, window), -1e4), diagonal=1).unsqueeze(0))

    def forward(self, x):  # x: (batch, 1, grid, d)
        x = x.squeeze(1)
        x = torch.roll(x, shifts=-self.shift, dims=1)
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b * n // self.window, self.window, 3, d).unbind(2)
        att = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5 + self.mask, dim=-1)
        y = self.out(att @ v).view(b, n, d)
        return torch.roll(y, shifts=self.shift, dims=1) + x


def model():
    return ShiftedWindow()


def inputs():
    return (torch.randn(2, 1, 8, 16),)
