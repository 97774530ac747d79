"""An fp16-only branch, as BART's encoder has one: activations clamped when they are float16. At fp16 the clamp
cuts every output to +-100 (the answer is ~1000 at fp32), so no op kept in fp32 can rescue the model as cast; its
fp32 export has no clamp at all, and a plan made from that would pass on a different model."""
import torch
from torch import nn


class Clamped(nn.Module):
    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        h = self.lin(x) * 1000.0
        if h.dtype == torch.float16:  # decided when the model is traced: a static branch of the program at fp16
            h = h.clamp(-100.0, 100.0)
        return h


def model():
    return Clamped()


def inputs():
    return (torch.randn(4, 16),)
