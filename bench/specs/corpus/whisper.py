"""Whisper (transformers WhisperModel), 2+2 layers, width 128, vocab 1000, random init: a conv front end over
80 mel bins x 100 frames, then encoder-decoder attention."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The decoder's last hidden state as a plain tensor, no cache."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.WhisperConfig(vocab_size=1000, d_model=128, encoder_layers=2, decoder_layers=2,
                                         encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                                         decoder_ffn_dim=256, max_source_positions=50, max_target_positions=64,
                                         pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
        self.m = transformers.WhisperModel(cfg)

    def forward(self, input_features, decoder_input_ids):
        return self.m(input_features=input_features, decoder_input_ids=decoder_input_ids, use_cache=False,
                      return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return torch.randn(1, 80, 100), torch.randint(3, 1000, (1, 8))
