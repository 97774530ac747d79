"""A float64 layer norm whose epsilon matters: inputs with a variance near eps = 0.1. ONNX stores a
LayerNormalization's epsilon as a float32 attribute (0.1 is 1.5e-9 off in float32), so the exported graph computes the
same function with that constant rounded: a departure of ~1e-10 from the torch program in float64, far under a
different function's, and no backend's fault."""
import torch
from torch import nn


def model():
    return nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16, eps=0.1), nn.Linear(16, 8))


def inputs():
    return (0.3 * torch.randn(4, 16),)
