"""A float64 model whose Python scalars are below float32's range: x * 1e-80 * 1e-80 is ~1e-160, which float64 holds.
torch.onnx stores each scalar as a float32 constant (0.0), so the exported graph computes 0: the exporter's failure,
which the float64 reference evaluator run on the exported graph shows before any backend is blamed."""
import torch
from torch import nn


class TinyScalars(nn.Module):
    def forward(self, x):
        return x * 1e-80 * 1e-80


def model():
    return TinyScalars()


def inputs():
    return (torch.randn(3, 4),)
