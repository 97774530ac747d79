"""A classifier head returning its logits and their argmax (an int64 output): the index is right or wrong, judged
by flips against the baseline's, never in the float norm."""
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 10))

    def forward(self, x):
        logits = self.net(x)
        return logits, logits.argmax(-1)


def model():
    return M()


def inputs():
    return (torch.randn(256, 32),)
