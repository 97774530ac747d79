"""A spec file: model() returns the nn.Module, inputs() a tuple of example tensors; both are called under a fixed seed
(--seed), so every worker builds the same weights and inputs. `fpdiff check docs/examples/spec.py`"""
import torch
from torch import nn


def model():
    return nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 8))


def inputs():
    return (torch.randn(4, 32),)


def dynamic_shapes():  # optional, in torch.export's form: turns on shape variants (static, dynamic, mixed:...)
    from torch.export import Dim
    return {"input": {0: Dim("batch", min=1, max=64)}}


tolerance = {"fp16": 2e-2}  # optional: a precision's tolerance (rel L2) for this model
