"""ViT (transformers ViTModel), 2 layers, width 128, 32x32 images in 8x8 patches, random init."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.ViTConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=256, image_size=32, patch_size=8)
        self.m = transformers.ViTModel(cfg, add_pooling_layer=False)

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 3, 32, 32),)
