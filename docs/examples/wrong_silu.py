"""A backend with a planted bug, to see what fpdiff says about one: it runs the program it is handed as torch does,
except that its SiLU computes x * sigmoid(1.1 x). `--plugin docs/examples/wrong_silu.py --backends torch,wrong-silu`"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _WrongSilu(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.silu.default:
            x = args[0]
            return x * torch.sigmoid(1.1 * x)
        return func(*args, **(kwargs or {}))


class WrongSilu:
    name = "wrong-silu"

    def available(self) -> str | None:
        return None

    def prepare(self, program, precision: str, device: str):
        module = program.module()

        def run(*inputs):
            with _WrongSilu():
                return module(*inputs)
        return run
