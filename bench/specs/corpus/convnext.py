"""ConvNeXt (transformers ConvNextModel), 2 stages, widths 32/64, 64x64 images, random init: depthwise 7x7
convolutions, channels-last layer norm, layer scale."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The pooled features as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.ConvNextConfig(num_stages=2, hidden_sizes=[32, 64], depths=[1, 1])
        self.m = transformers.ConvNextModel(cfg)

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values, return_dict=False)[1]


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 3, 64, 64),)
