"""CUDA cells: run only where a GPU is present; elsewhere skipped with the reason."""
import pytest
import torch

import fpdiff
from fpdiff.core.status import Status

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")]


def test_torch_and_inductor_cuda_cells_pass_in_fp32_and_tf32_loses_precision_honestly():
    r = fpdiff.check("example:tinyformer", backends=["torch", "inductor"], precisions=["fp32", "tf32", "fp16"],
                     devices=["cuda"], shape_variants=["static"])
    for c in r.cells:
        assert c.status in (Status.PASS, Status.PRECISION_LOSS), (c.backend, c.precision, c.reason)
        if c.precision == "fp32":
            assert c.status == Status.PASS


def test_iree_cuda_fp32_passes():
    pytest.importorskip("iree.compiler", reason="iree-base-compiler is not installed here")
    r = fpdiff.check("example:tinycnn", backends=["iree"], precisions=["fp32"], devices=["cuda"])
    c = r.cells[0]
    assert c.status == Status.PASS, c.reason
