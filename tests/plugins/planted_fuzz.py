"""A backend with one planted bug where ops meet: it runs every torch program in torch eager and is right, except
that a softmax over a dim of odd length (> 1) comes back scaled by 1.25 (an odd length is where vectorized
reductions handle their tail). Only that op's output is wrong; what follows it in the graph computes on from it, so
a later op may carry the error or hide it. A fuzz campaign must find it, minimize it to the softmax, and find
nothing else on this backend."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from fpdiff.backends.base import TORCH, Backend, Prepared

BUG = 1.25
_SOFTMAX = (torch.ops.aten._softmax.default, torch.ops.aten.softmax.int)


def planted(func, args) -> bool:
    """A softmax whose reduced dim has odd length above 1."""
    if func not in _SOFTMAX:
        return False
    x, dim = args[0], args[1]
    n = x.shape[dim]
    return n > 1 and n % 2 == 1


class _Planted(TorchDispatchMode):
    """Every aten op as torch computes it, the planted softmax scaled."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * BUG if planted(func, args) else out


class PlantedFuzzBackend(Backend):
    name = "planted-fuzz"
    kinds = frozenset({TORCH})
    shape_variants = True

    def prepare_task(self, task) -> Prepared:
        module = task.program().module()

        def run(*inputs):
            with torch.no_grad(), _Planted():
                return list(tree_flatten(module(*inputs))[0])
        return Prepared(run)

    def repro(self, r) -> str:
        """The bundle runs this file's own code: the plugin is copied next to the script."""
        import shutil
        from pathlib import Path

        from fpdiff.backends.base import TORCH_INPUTS
        shutil.copy(Path(__file__), r.out / "planted_fuzz.py")
        return TORCH_INPUTS + '''import importlib.util
spec = importlib.util.spec_from_file_location("planted_fuzz", str(here / "planted_fuzz.py"))
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)
from torch.utils._pytree import tree_flatten
with torch.no_grad(), plugin._Planted():
    outs = list(tree_flatten(program.module()(*xt))[0])
'''
