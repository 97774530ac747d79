"""A LayerNorm over 384 features at MiniLM's shapes: IREE's fp16 lowering keeps the statistics in fp16, torch
accumulates them in fp32."""
import torch


class Norm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(384)

    def forward(self, x):
        return self.ln(x * 3 + 1)


def model():
    return Norm()


def inputs():
    return (torch.randn(2, 12, 32, 384),)
