"""A detector head on an input with nothing to detect: a sigmoid whose every output is between 1e-7 and 1e-5
(logits -16 to -11.5). ONNX Runtime's fp32 Sigmoid errs by ~1e-7 absolute there, which is up to several times the
value itself: a large relative departure that is tiny on the sigmoid's own [0, 1] scale. The float64 reference barely
moves under perturbations (d log sigmoid / d x ~ 1), so this is no ill-conditioning: which verdict holds depends on
what the output means."""
import torch


class RareHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.score = torch.nn.Linear(16, 8)
        with torch.no_grad():
            self.score.weight.mul_(0.1)
            self.score.bias.fill_(-14.0)

    def forward(self, x):
        return torch.sigmoid(self.score(x))


def model():
    return RareHead()


def inputs():
    return (torch.randn(64, 16),)
