"""A mixture of experts computed the way transformers' default experts kernel does: tokens sorted by their expert,
one torch grouped matmul over all experts (torch.nn.functional.grouped_mm). Torch's kernel takes float32, float16 and
bfloat16 only, so the model as written cannot run in float64; the float64 judge computes it with fpdiff's own
per-expert matmul."""
import torch
from torch import nn

EXPERTS, WIDTH, HIDDEN = 4, 16, 32  # widths in multiples of 16 bytes: the kernel's stride rule


class GroupedExperts(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.router = nn.Linear(WIDTH, EXPERTS)
        self.w = nn.Parameter(torch.randn(EXPERTS, WIDTH, HIDDEN) / WIDTH**0.5)

    def forward(self, x):
        expert = self.router(x).argmax(-1)
        order = expert.argsort()
        offs = torch.bincount(expert, minlength=EXPERTS).cumsum(0).to(torch.int32)
        out = nn.functional.grouped_mm(x[order], self.w, offs=offs)
        return out[order.argsort()]


def model():
    return GroupedExperts()


def inputs():
    return (torch.randn(24, WIDTH),)
