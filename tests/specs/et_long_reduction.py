"""A long fp16 sum of positive terms on ExecuTorch's CPU kernels: a 1-D convolution over 16 x 2048 taps with positive
weights, between two small linears. XNNPACK accumulates it in float32; the CPU kernels (no partitioner) accumulate in
float16, where a long positive sum stagnates and departs."""
import torch


class LongSum(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pre = torch.nn.Linear(16, 16)
        self.sum = torch.nn.Conv1d(16, 16, kernel_size=2048, bias=False)
        with torch.no_grad():
            self.sum.weight.abs_()
        self.post = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = self.pre(x.transpose(1, 2)).transpose(1, 2)
        h = self.sum(torch.relu(h) + 1.0)
        return self.post(h.mean(-1))


def model():
    return LongSum()


def inputs():
    return (torch.randn(2, 16, 2100),)
