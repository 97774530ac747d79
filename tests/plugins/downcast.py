"""A plugin backend that computes coarser than asked: every matmul and conv in bfloat16 when asked for fp16,
results handed back as float16 (what a CPU plugin with an f16 hint does on a bf16-capable CPU)."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
HEAVY = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default, aten.convolution.default,
         aten.linear.default, aten.conv2d.default, aten.matmul.default}


class _InBf16(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in HEAVY:
            return func(*args, **kwargs)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or tensors[0].dtype != torch.float16:
            return func(*args, **kwargs)
        def half(x):
            return x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.dtype == torch.float16 else x

        out = func(*[half(a) for a in args], **{k: half(v) for k, v in kwargs.items()})
        return out.to(torch.float16)


class DowncastBackend:
    name = "downcast"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        module = program.module()

        def run(*inputs):
            with torch.no_grad(), _InBf16():
                return module(*inputs)
        return run


class HonestBackend:
    """The same plugin path without the downcast: the false-alarm control."""
    name = "honest"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        module = program.module()

        def run(*inputs):
            with torch.no_grad():
                return module(*inputs)
        return run
