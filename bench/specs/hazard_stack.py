"""Six MLP blocks over a residual stream with large activations (|x| ~ 300, as with the outlier features of
large language models), each normalized by a hand-written RMSNorm: x*x and its mean overflow fp16 inside the
norm although every block's input and output fit. The case of a model that is right in fp32, wrong in fp16."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)
        self.gain = nn.Parameter(torch.full((d,), 300.0))

    def forward(self, x):
        x = x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))
        ms = (x * x).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + 1e-6) * self.gain


class Stack(nn.Module):
    def __init__(self, d: int = 128, blocks: int = 6) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(blocks)])
        self.head = nn.Linear(d, 16)

    def forward(self, x):
        return self.head(self.blocks(x) / 300.0)


def model():
    return Stack()


def inputs():
    return (torch.randn(32, 128) * 300.0,)
