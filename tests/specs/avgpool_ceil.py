"""An average pool whose window is larger than its input, with ceil_mode (how transformers' EfficientNet pools):
torch clips the window; iree-compile 3.13 fails verifying its own lowering
(bench/upstream/iree_avg_pool_ceil_mode.py)."""
import torch


class M(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pool = torch.nn.AvgPool2d(4, ceil_mode=True)

    def forward(self, x):
        return self.pool(x)


def model():
    return M()


def inputs():
    return (torch.randn(1, 3, 2, 2),)
