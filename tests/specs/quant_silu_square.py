"""SiLU into a 1x1 conv on an input whose channels, height and width are equal (1x8x8x8): ExecuTorch 1.5.1 lowers
the dynamically quantized conv for XNNPACK with its input permuted twice, and the program runs and returns wrong
numbers (findings/quant-002). A real departure quant must call mismatch from the outputs alone."""
import torch
from torch import nn


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.SiLU(), nn.Conv2d(8, 8, 1)).eval()


def inputs():
    return (torch.randn(1, 8, 8, 8, generator=torch.Generator().manual_seed(1)),)
