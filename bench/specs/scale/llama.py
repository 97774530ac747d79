"""A Llama-shaped decoder of a chosen size (transformers LlamaModel from a config, random init, no download), for
the memory and time of every analysis at real sizes. FPDIFF_BENCH_SIZE picks it: 0.4b, 1.2b or 4b parameters
(or `tiny`, for tests). A short sequence keeps activations small: the weights are what is measured. FPDIFF_BENCH_PLANT
names a layer whose MLP output is multiplied by 2**16 on its way back into the residual stream: finite at fp32 and
bf16, past fp16's 65504, a planted fp16 overflow that locate must name."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
import transformers

# name -> (hidden, intermediate, layers, heads, kv heads); parameters with vocab 32000:
# 0.4b: 0.40e9, 1.2b: 1.15e9, 4b: 3.93e9
SIZES = {"tiny": (64, 128, 2, 4, 2), "0.4b": (1024, 4096, 24, 16, 4), "1.2b": (2048, 5632, 24, 32, 8),
         "4b": (3072, 8192, 38, 24, 8)}
SIZE = os.environ.get("FPDIFF_BENCH_SIZE", "0.4b")
PLANT = os.environ.get("FPDIFF_BENCH_PLANT")
VOCAB = 1000 if SIZE == "tiny" else 32000
TOKENS = 32


class Scaled(torch.nn.Module):
    """Multiplies what it is given by a power of two: exact at every precision until it overflows one."""

    def __init__(self, inner: torch.nn.Module, factor: float) -> None:
        super().__init__()
        self.inner, self.factor = inner, factor

    def forward(self, x):
        return self.inner(x) * self.factor


class Decoder(torch.nn.Module):
    """The last hidden state as a plain tensor, no cache."""

    def __init__(self) -> None:
        super().__init__()
        hidden, inter, layers, heads, kv = SIZES[SIZE]
        cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=hidden, intermediate_size=inter,
                                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                                       max_position_embeddings=256)
        self.m = transformers.LlamaModel(cfg)
        if PLANT is not None:
            layer = self.m.layers[int(PLANT)]
            layer.mlp = Scaled(layer.mlp, 2.0 ** 16)

    def forward(self, input_ids):
        return self.m(input_ids=input_ids, use_cache=False, return_dict=False)[0]


def model():
    return Decoder()


def inputs():
    return (torch.randint(0, VOCAB, (1, TOKENS)),)
