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
        trained_scale(self.m)

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values, return_dict=False)[1]


def trained_scale(m: torch.nn.Module) -> None:
    """Activations at the scale a trained network has. transformers' random init draws convolutions at std 0.02,
    which shrinks activations layer after layer: the output is ~1e-24, below fp16's range. He-initialized
    convolutions and unit BatchNorm keep them near 1, as training does."""
    for mod in m.modules():
        if isinstance(mod, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
        elif isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_parameters()


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 3, 64, 64),)
