"""DeBERTa-v2 (transformers DebertaV2Model), 2 layers, width 64, random init: disentangled relative
attention (position buckets, log-bucketing, gathers over relative positions), LayerNorm, GELU."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.DebertaV2Config(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                           num_attention_heads=4, max_position_embeddings=64, relative_attention=True,
                                           position_buckets=16, pos_att_type=["p2c", "c2p"])
        self.m = transformers.DebertaV2Model(cfg)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randint(0, 1000, (2, 16)),)
