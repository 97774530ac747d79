"""Gemma 2 (transformers Gemma2Model), 2 layers, width 128, random init: RMSNorm with (1 + w), rotary
positions, attention-logit and final soft-capping (tanh), alternating sliding-window (8) and global layers,
GELU-tanh gated MLP."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor, no cache."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.Gemma2Config(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                                        max_position_embeddings=64, sliding_window=8,
                                        attn_logit_softcapping=50.0, final_logit_softcapping=30.0)
        self.m = transformers.Gemma2Model(cfg)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randint(0, 1000, (2, 16)),)
