"""BART (transformers BartModel), 1 encoder and 1 decoder layer, width 64, random init: an encoder-decoder
with learned positions, LayerNorm, GELU, and an fp16-only branch (the encoder clamps its hidden states when they
are float16)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The decoder's last hidden state as a plain tensor, no cache; decoder inputs from the same ids."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.BartConfig(vocab_size=1000, d_model=64, encoder_layers=1, decoder_layers=1,
                                      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                      decoder_ffn_dim=128,
                                      max_position_embeddings=64)
        self.m = transformers.BartModel(cfg)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, decoder_input_ids=input_ids, use_cache=False,
                      return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return (torch.randint(0, 1000, (2, 16)),)
