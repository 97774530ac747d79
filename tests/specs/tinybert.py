"""A BERT encoder (transformers BertModel) from a small config: 2 layers, width 64, 4 heads, a padded sequence."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Encoder(torch.nn.Module):
    """The last hidden state as a plain tensor."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=128, max_position_embeddings=32)
        self.m = transformers.BertModel(cfg, add_pooling_layer=False)

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


def model():
    return Encoder().eval()


def inputs():
    mask = torch.ones(2, 16, dtype=torch.int64)
    mask[1, 12:] = 0  # one padded sequence: the mask path runs
    return torch.randint(0, 100, (2, 16)), mask
