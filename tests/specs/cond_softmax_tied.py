"""A softmax over tied huge logits: a classifier head whose 64 class rows are one placeholder row, so every logit
is the same number (~1e4) and the float64 answer is uniform. Any rounding of one logit by fp32's unit roundoff
(1e4 * 6e-8 = 6e-4) moves its probability by ~6e-4 relative: the output is ill-conditioned at every input, and
an implementation that sums the rows in different orders (breaking the tie) departs by that much without any bug."""
import torch

CLASSES, WIDTH = 64, 32


class TiedHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(WIDTH, WIDTH)
        self.head = torch.nn.Linear(WIDTH, CLASSES)
        with torch.no_grad():
            row = torch.rand(1, WIDTH) + 0.5  # positive: the logits add up to ~1e4 instead of cancelling
            self.head.weight.copy_(row.expand(CLASSES, WIDTH) * 40.0)
            self.head.bias.zero_()

    def forward(self, x):
        h = torch.relu(self.body(x)) + 8.0
        return torch.softmax(self.head(h), dim=-1)


def model():
    return TiedHead()


def inputs():
    return (torch.randn(4, WIDTH),)
