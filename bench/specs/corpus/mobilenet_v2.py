"""MobileNetV2 (transformers MobileNetV2Model), depth multiplier 0.35, 64x64 images, random init: inverted
residuals, depthwise convolutions, ReLU6, TF-style padding."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The pooled features as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.MobileNetV2Config(image_size=64, depth_multiplier=0.35)
        self.m = transformers.MobileNetV2Model(cfg)

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values, return_dict=False)[1]


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 3, 64, 64),)
