"""Four linear layers, the first's output channels spanning 10,000x in range: one per-tensor activation scale leaves
its small channels a level or two, so int8 costs more than the format's tolerance there, and only there; the other
layers quantize well. A quantized plan leaves that activation float (the nodes that make and read it) and keeps the
last two layers in int8."""
import torch
from torch import nn


class OneWideLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, 16), nn.Linear(16, 16)
        self.fc3, self.fc4 = nn.Linear(16, 16), nn.Linear(16, 8)
        with torch.no_grad():
            self.fc1.weight.mul_(torch.logspace(-4, 0, 16).unsqueeze(1))  # channel i's range: 10^(-4 + 4i/15)
            self.fc2.weight.div_(torch.logspace(-4, 0, 16).unsqueeze(0))  # the next layer reads every channel alike

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.relu(self.fc2(h))
        return self.fc4(torch.relu(self.fc3(h)))


def model():
    return OneWideLayer()


def inputs():
    return (torch.randn(64, 32),)
