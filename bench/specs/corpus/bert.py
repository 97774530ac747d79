"""BERT (transformers BertModel), 2 layers, width 128, vocab 1000, random init: an encoder with non-persistent
position_ids / token_type_ids buffers (what IREE's frozen FX import cannot map)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=256, max_position_embeddings=64)
        self.m = transformers.BertModel(cfg, add_pooling_layer=False)

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 12:] = 0  # one padded sequence: the mask path is exercised
    return torch.randint(0, 1000, (2, 16)), mask
