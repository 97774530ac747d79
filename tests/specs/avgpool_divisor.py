"""Average pooling with divisor_override: ONNX's AveragePool has no such attribute, and torch.onnx (both of its
exporters, torch 2.13) drops it, so the exported graph divides by the window size instead (another function)."""
import torch
import torch.nn.functional as F


class Pool(torch.nn.Module):
    def forward(self, x):
        return F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=2)


def model():
    return Pool()


def inputs():
    return (torch.randn(1, 3, 9, 9),)
