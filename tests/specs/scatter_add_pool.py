"""Token features summed into bags with index_add (ScatterElements/ScatterND with reduction 'add' in ONNX)."""
import torch
from torch import nn


class BagPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x, bag):
        h = torch.relu(self.proj(x))
        return torch.zeros(4, 16, dtype=h.dtype).index_add(0, bag, h)


def model():
    return BagPool()


def inputs():
    return torch.randn(12, 16), torch.randint(0, 4, (12,))
