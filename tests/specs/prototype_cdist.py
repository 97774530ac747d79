"""A prototype classifier (few-shot and metric-learning heads): distances to learned class prototypes with
torch.cdist, which has no fp16 CPU kernel in torch 2.8 (IPEX's stack); autocast runs it in fp32."""
import torch


class Prototypes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32))
        self.prototypes = torch.nn.Parameter(torch.randn(10, 32))

    def forward(self, x):
        return -torch.cdist(self.embed(x), self.prototypes)


def model():
    return Prototypes()


def inputs():
    return (torch.randn(16, 64),)
