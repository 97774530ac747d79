"""A model calling a custom op its own file registers (as transformers registers grouped_mm_fallback for its MoE
layers): a program cut from it loads only where that registration ran."""
import torch


@torch.library.custom_op("fpdiff_test::scaled_tanh", mutates_args=())
def scaled_tanh(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(x) * scale


@scaled_tanh.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(8, 8), torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.b(scaled_tanh(self.a(x), 0.5))


def model():
    return Net()


def inputs():
    return (torch.randn(2, 8),)
