"""A tiny transformers Llama (1 layer, width 32): RMSNorm's explicit .to(torch.float32) and .to(input_dtype),
rotary embeddings computed under no_grad with autocast disabled (a mode subgraph in torch.export) and cast with
.to(x.dtype), grouped-query attention."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The last hidden state as a plain tensor, no cache."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
        self.m = transformers.LlamaModel(cfg)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randint(0, 64, (1, 8)),)
