"""A small encoder over padded batches written the common way: the attention bias is (1 - mask) * the float32
minimum (-3.4e38), and the token embeddings are cosine-normalized with eps 1e-8 after padded rows are zeroed.
In fp16 the minimum is -inf, so 0 * -inf makes every score NaN, and eps is 0, so padded rows are 0/0."""
import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x, bias):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5 + bias
        a = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.proj(a))
        return self.ln2(x + self.mlp(x))


class Encoder(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4, layers: int = 4) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Layer(d, heads) for _ in range(layers)])

    def forward(self, x, mask):
        bias = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, bias)
        x = x * mask[..., None]
        return x / (x.norm(dim=-1, keepdim=True) + 1e-8)


def model():
    return Encoder()


def inputs():
    mask = torch.ones(4, 32)
    mask[1, 20:] = 0
    mask[3, 9:] = 0
    return (torch.randn(4, 32, 64), mask)
