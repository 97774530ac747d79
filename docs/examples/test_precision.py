import pytest
import torch
from mymodels import Encoder

import fpdiff


@pytest.mark.fpdiff(backends=["torch", "ort"], precisions=["fp16"])
def test_encoder_agrees(fpdiff_cell, fpdiff_assert):  # runs once per backend x precision
    torch.manual_seed(0)
    fpdiff_assert(Encoder().eval(), (torch.randn(4, 16, 64),))


def test_exported_model_agrees():  # or the function alone, on a spec file, an ONNX file or example:NAME
    fpdiff.assert_agrees("example:tinycnn", backends=["ort"], precisions=["fp16"])
