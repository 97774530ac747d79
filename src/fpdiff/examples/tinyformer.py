"""A small pre-norm transformer block: layer norm, softmax attention, GELU MLP; batch and sequence dynamic."""
import math

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def model():
    return Block()


def inputs():
    return (torch.randn(2, 16, 64),)


def dynamic_shapes():
    from torch.export import Dim
    return {"x": {0: Dim("batch", min=1, max=64), 1: Dim("seq", min=2, max=512)}}
