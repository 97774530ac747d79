"""RMSNorm (which Core ML decomposes) and a 1e-9 buffer (below fp16's smallest subnormal): what a FLOAT16 conversion
changes before any prediction."""
import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(64, eps=1e-9)
        self.fc = torch.nn.Linear(64, 64)
        self.register_buffer("tiny", torch.full((64,), 1e-9))

    def forward(self, x):
        return self.fc(self.norm(x)) + self.tiny


def model():
    return M()


def inputs():
    return (torch.randn(4, 64),)
