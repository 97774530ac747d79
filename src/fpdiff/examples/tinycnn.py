"""A small CNN: conv, batch norm, group norm, SiLU, pooling and a linear head."""
import torch
from torch import nn


class TinyCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GroupNorm(4, 32), nn.SiLU(),
            nn.Conv2d(32, 32, 1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


def model():
    m = TinyCNN()
    with torch.no_grad():  # non-trivial running stats, so batch norm is not an identity in eval mode
        m.features[1].running_mean.uniform_(-0.5, 0.5)
        m.features[1].running_var.uniform_(0.5, 2.0)
    return m


def inputs():
    return (torch.randn(2, 3, 32, 32),)
