"""A float64 model that no torch.onnx exporter can carry: LeakyRelu's slope is a float attribute, which ONNX stores in
float32, so a slope of 1e-80 becomes 0 and the exported graph answers 0 where the torch program answers -|x| * 1e-80.
Both exporters' graphs depart from the program: the failure is torch.onnx's at onnx export, not a backend's."""
import torch
from torch import nn


class LeakySlope(nn.Module):
    def forward(self, x):
        return nn.functional.leaky_relu(-x.abs(), negative_slope=1e-80)


def model():
    return LeakySlope()


def inputs():
    return (torch.randn(3, 4),)
