"""Mixtral (transformers MixtralModel), 2 layers, width 128, 4 experts top-2, random init: RMSNorm,
rotary positions, sliding window, a sparse MoE router (softmax, top-k, per-expert gather and index_add)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor, no cache."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.MixtralConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                         num_local_experts=4, num_experts_per_tok=2, sliding_window=8)
        self.m = transformers.MixtralModel(cfg)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randint(0, 1000, (2, 16)),)
