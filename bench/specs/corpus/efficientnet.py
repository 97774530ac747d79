"""EfficientNet (transformers EfficientNetModel), width and depth coefficients 0.25, 64x64 images, random init:
squeeze-and-excitation, depthwise convolutions, SiLU."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The pooled features as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.EfficientNetConfig(image_size=64, width_coefficient=0.25, depth_coefficient=0.25,
                                              hidden_dim=320)  # the top conv width: 1280 x 0.25
        self.m = transformers.EfficientNetModel(cfg)
        trained_scale(self.m)

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values, return_dict=False)[1]


def trained_scale(m: torch.nn.Module) -> None:
    """Activations at the scale a trained network has. transformers' random init draws BatchNorm scales around 0
    (std 0.02), which shrinks activations layer after layer to ~1e-40: the float32 output itself underflows.
    He-initialized convolutions and unit BatchNorm keep them near 1, as training does."""
    for mod in m.modules():
        if isinstance(mod, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(mod.weight, nonlinearity="relu")
        elif isinstance(mod, torch.nn.BatchNorm2d):
            mod.reset_parameters()


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 3, 64, 64),)
