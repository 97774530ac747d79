"""PyTorch eager: the reference implementation, and the baseline every other backend is measured against."""
from __future__ import annotations

import contextlib

import torch

from fpdiff.backends.base import TORCH_INPUTS, Backend, Prepared, Repro
from fpdiff.core.errors import Unsupported
from fpdiff.core.precision import Precision, dtype_name


def precision_context(precision: Precision, device: str, autocast: bool = True):
    """Autocast for amp-*, and TF32 on or off explicitly (cuDNN convs default to TF32 on CUDA: fp32 must not)."""
    stack = contextlib.ExitStack()
    if device.startswith("cuda"):
        stack.enter_context(_tf32(precision.name == "tf32"))
    if autocast and precision.autocast is not None:
        stack.enter_context(torch.autocast(device_type=device.split(":")[0], dtype=precision.autocast))
    return stack


@contextlib.contextmanager
def _tf32(on: bool):
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def computed_dtype(precision: Precision) -> str:
    if precision.autocast is not None:
        return f"mixed ({dtype_name(precision.autocast)} + float32)"
    return "tf32 (float32 storage)" if precision.name == "tf32" else dtype_name(precision.dtype)


def device_runner(fn, precision: Precision, device: str, autocast: bool = True):
    """Move inputs to the device, run under the precision's context, bring outputs back to the CPU."""
    def run(*inputs):
        with torch.no_grad(), precision_context(precision, device, autocast):
            out = fn(*(t.to(device) for t in inputs))
        return torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, out)
    return run


class TorchBackend(Backend):
    name = "torch"
    shape_variants = False  # eager runs the shapes it is given: every variant would be the same run
    reference = True
    runs_modules = True

    def prepare_task(self, task) -> Prepared:
        if not task.is_torch:
            raise Unsupported("torch eager runs torch models; this model is ONNX")
        module = task.module().to(task.device)
        return Prepared(device_runner(module, task.precision, task.device), computed_dtype(task.precision))

    def repro(self, r: Repro) -> str | None:
        if r.onnx_segment:
            return None
        return TORCH_INPUTS + """with torch.no_grad():
    outs = program.module()(*xt)
"""
