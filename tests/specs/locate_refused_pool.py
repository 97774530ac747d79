"""A refusal deep inside: ops before and after an average pool whose window is larger than its input with
ceil_mode (how transformers' EfficientNet pools), which iree-compile 3.13 fails to lower
(bench/upstream/iree_avg_pool_ceil_mode.py). locate must name the pool, not the segment's first op."""
import torch
from torch import nn


class M(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.pool = nn.AvgPool2d(4, ceil_mode=True)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.norm(self.conv(x)))
        h = torch.sigmoid(h * 0.5 + 1.0) * h
        h = self.pool(h)
        h = h.flatten(1)
        return torch.tanh(self.head(h) * 2.0 - 0.5)


def model():
    return M().eval()


def inputs():
    return (torch.randn(1, 3, 2, 2),)
