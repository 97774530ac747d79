"""Swin (transformers SwinModel) with shifted windows: 2 stages of 2 blocks, embed dim 32, windows of 4,
32x32 images, random init. The second block of each stage shifts its windows (torch.roll and an attention mask);
the corpus `swin` has one block per stage and so never shifts."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                                      window_size=4)
        self.m = transformers.SwinModel(cfg, add_pooling_layer=False)

    def forward(self, pixel_values):
        return self.m(pixel_values=pixel_values, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 3, 32, 32),)
