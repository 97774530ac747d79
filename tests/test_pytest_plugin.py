"""The pytest plugin and assert_agrees, as a user's suite meets them: a real inner pytest run of a test file."""
import pytest

import fpdiff
from conftest import PLUGINS

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # real checks: make test, not make test-fast

USER_TESTS = '''
import pytest
import torch

import fpdiff


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


@pytest.mark.fpdiff(backends=["torch", "ort"], precisions=["fp32", "fp16"])
def test_mlp_agrees(fpdiff_cell, fpdiff_assert):
    torch.manual_seed(0)
    fpdiff_assert(Mlp(), (torch.randn(8, 16),), repeat=1)


def test_broken_backend_fails_with_the_grid():
    fpdiff.assert_agrees("example:tinycnn", backends=["perturb"], precisions=["fp32"], repeat=1,
                         plugins=[{plugin!r}])
'''


def test_marker_parametrizes_and_a_disagreement_fails_with_the_grid(pytester):
    pytester.makepyfile(test_user=USER_TESTS.format(plugin=str(PLUGINS / "perturb.py")))
    r = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=4, failed=1)
    out = r.stdout.str()
    for cell in ("torch-fp32", "torch-fp16", "ort-fp32", "ort-fp16"):
        assert f"test_mlp_agrees[{cell}] PASSED" in out
    assert "does not agree across perturb x fp32" in out and "mismatch" in out and "perturb" in out


def test_assert_agrees_returns_the_result_when_all_agree():
    r = fpdiff.assert_agrees("example:rmsnorm", backends=["torch", "ort"], precisions=["fp32"], repeat=1)
    assert {c.status for c in r.cells} == {"pass"}


def test_assert_agrees_refuses_inputs_without_a_module():
    with pytest.raises(fpdiff.core.errors.UsageError, match="inputs go with a module"):
        fpdiff.assert_agrees("example:rmsnorm", inputs=())
