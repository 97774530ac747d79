"""ResNet (transformers ResNetModel), 2 stages of basic blocks, widths 32/64, 64x64 images, random init:
batch norm in inference form (what IREE's FX import needs decomposed)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The pooled features as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.ResNetConfig(embedding_size=32, hidden_sizes=[32, 64], depths=[1, 1], layer_type="basic")
        self.m = transformers.ResNetModel(cfg)

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values, return_dict=False)[1]


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 3, 64, 64),)
