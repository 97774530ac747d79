"""Wav2Vec2 (transformers Wav2Vec2Model), a conv speech encoder: 3 strided 1-D convolutions with group norm
over raw audio, a convolutional relative position embedding (weight-normed), 2 transformer layers, random init."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.Wav2Vec2Config(vocab_size=32, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=128, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
                                          conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                                          num_conv_pos_embedding_groups=4, do_stable_layer_norm=False)
        self.m = transformers.Wav2Vec2Model(cfg)

    def forward(self, input_values):
        return self.m(input_values=input_values, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randn(2, 1600),)
