"""Six pre-norm transformer blocks (d=256, 8 heads), batch 8 x 128 tokens: a mid-size model for locate benchmarks.
q, k and v are sliced out of one projection (not chunked: ONNX's SplitToSequence output is a sequence, which
Polygraphy cannot mark as an output)."""
import math

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d=256, heads=8):
        super().__init__()
        self.d, self.heads = d, heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(self.ln1(x))
        q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for i in range(3))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d // self.heads), dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


def model():
    return nn.Sequential(*[Block() for _ in range(6)])


def inputs():
    return (torch.randn(8, 128, 256),)
