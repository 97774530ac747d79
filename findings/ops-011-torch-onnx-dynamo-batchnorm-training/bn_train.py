import torch
import torch.nn.functional as F


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("rm", torch.zeros(5))
        self.register_buffer("rv", torch.ones(5))

    def forward(self, x):
        return F.batch_norm(x, self.rm.clone(), self.rv.clone(), training=True, momentum=0.5, eps=0.6)


def model():
    return M()


def inputs():
    return (torch.randn(5, 5, 5) * 3 + 1,)
