"""DistilBERT (transformers DistilBertModel), 2 layers, width 128, vocab 1000, random init: an encoder without
token types, with its own attention and LayerNorm layout (OpenVINO's bf16 hint runs most of it wider on CPUs
without native bf16 arithmetic)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.DistilBertConfig(vocab_size=1000, dim=128, n_layers=2, n_heads=4, hidden_dim=256,
                                            max_position_embeddings=64)
        self.m = transformers.DistilBertModel(cfg)

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 12:] = 0  # one padded sequence: the mask path is exercised
    return torch.randint(0, 1000, (2, 16)), mask
