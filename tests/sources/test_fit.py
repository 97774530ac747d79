"""Inputs that do not fit a torch model are the user's input error, said before any worker starts."""
import pytest
import torch

from fpdiff.core.errors import UsageError
from fpdiff.sources.fit import check_fit


def _mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()


def test_a_linear_given_the_wrong_width_names_the_layer_and_what_it_takes():
    with pytest.raises(UsageError) as e:
        check_fit(_mlp(), (torch.randn(2, 12),), ["x"])
    line = str(e.value)
    assert "0 (Linear: takes last dim 16)" in line and "x [2, 12] float32" in line and "\n" not in line


def test_a_conv_given_the_wrong_channels_names_them():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3)).eval()
    with pytest.raises(UsageError, match=r"0 \(Conv2d: takes 3 channels"):
        check_fit(m, (torch.randn(1, 4, 16, 16),), ["image"])


def test_inputs_that_fit_pass_quietly():
    check_fit(_mlp(), (torch.randn(2, 16),), ["x"])


class _DataDependent(torch.nn.Module):
    """Python control flow on values: fake tensors cannot trace it, the real model runs."""

    def forward(self, x):
        return x * 2 if bool(x.sum() > 0) else x - 1


def test_a_model_fake_tensors_cannot_trace_is_not_refused():
    check_fit(_DataDependent(), (torch.randn(3, 5),), ["x"])


class _RaisesOtherwise(torch.nn.Module):
    def forward(self, x):
        raise ValueError("the model's own complaint about its size")


def test_an_error_that_is_not_the_inputs_shape_is_left_to_the_reference():
    check_fit(_RaisesOtherwise(), (torch.randn(3, 5),), ["x"])
