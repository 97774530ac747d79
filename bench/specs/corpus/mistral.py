"""Mistral (transformers MistralModel), 2 layers, width 128, random init: RMSNorm, rotary
positions, grouped-query attention with a sliding window (8) shorter than the sequence (16)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor, no cache."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.MistralConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         sliding_window=8)
        self.m = transformers.MistralModel(cfg)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randint(0, 1000, (2, 16)),)
