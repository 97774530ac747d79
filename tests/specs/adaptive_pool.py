"""Adaptive average pooling to (4, 2): ONNX Runtime has a bfloat16 CPU kernel for what torch.onnx exports it to
(to 1 it becomes ReduceMean, which has none)."""
import torch
import torch.nn.functional as F


class Pool(torch.nn.Module):
    def forward(self, x):
        return F.adaptive_avg_pool2d(x, (4, 2))


def model():
    return Pool()


def inputs():
    return (torch.randn(2, 3, 8, 8),)
