"""A router that counts tokens per expert with torch.histc (as mixtral's does): not a Core ATen op, so ExecuTorch's
lowering and litert-torch refuse it. Their refusal names the op."""
import torch


class Router(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(8, 4)

    def forward(self, x):
        experts = self.gate(x).argmax(-1).float()
        counts = torch.histc(experts, bins=4, min=0, max=3)
        return self.gate(x) * counts


def model():
    return Router()


def inputs():
    return (torch.randn(6, 8),)
