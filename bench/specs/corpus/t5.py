"""T5 (transformers T5Model), 2+2 layers, width 128, vocab 1000, random init: encoder-decoder with relative
position buckets; torch.onnx's dynamo exporter cannot export it, the TorchScript exporter can."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # built from a config: nothing to download
import torch
import transformers


class Wrapped(torch.nn.Module):
    """The decoder's last hidden state as a plain tensor, no cache."""

    def __init__(self) -> None:
        super().__init__()
        cfg = transformers.T5Config(vocab_size=1000, d_model=128, d_kv=32, d_ff=256, num_layers=2,
                                    num_decoder_layers=2, num_heads=4)
        self.m = transformers.T5Model(cfg)

    def forward(self, input_ids, decoder_input_ids):
        return self.m(input_ids=input_ids, decoder_input_ids=decoder_input_ids, use_cache=False,
                      return_dict=False)[0]


def model():
    return Wrapped()


def inputs():
    return torch.randint(0, 1000, (2, 16)), torch.randint(0, 1000, (2, 8))
