"""A linear layer whose output channels span 10,000x in range: per-tensor activation quantization (one scale for the
tensor) leaves the small channels a level or two, so int8 costs much here, while the backend computes exactly what
the format says. A correctly quantized model whose quantization loss is large: quantization-loss, never mismatch."""
import torch
from torch import nn


class ChannelRanges(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)
        self.out = nn.Linear(16, 8)
        with torch.no_grad():
            self.fc.weight.mul_(torch.logspace(-4, 0, 16).unsqueeze(1))  # channel i's range: 10^(-4 + 4i/15)
            self.out.weight.div_(torch.logspace(-4, 0, 16).unsqueeze(0))  # the head reads every channel alike

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


def model():
    return ChannelRanges()


def inputs():
    return (torch.randn(64, 32),)
