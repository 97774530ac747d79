"""GPT-2 (transformers GPT2Model), 2 layers, width 128, vocab 1000, random init: a decoder with learned positions."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor, no cache (fpdiff compares tensors)."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.GPT2Config(vocab_size=1000, n_positions=64, n_embd=128, n_layer=2, n_head=4,
                                    bos_token_id=1, eos_token_id=2)
        self.m = transformers.GPT2Model(cfg)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randint(0, 1000, (2, 16)),)
