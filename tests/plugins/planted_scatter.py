"""A backend with SEEDS.md #2's class of bug planted: it runs every torch program in torch eager and is right, except
that a scatter whose data mixes static and dynamic dims (one dim symbolic in the exported program, another a fixed
size above 1) comes back scaled by 1.25. With every dim static, or every dim of the data dynamic, it is right: the
bug lives only in a mix, where the compiler of the incident specialized one dim and not the other. A fuzz campaign
given the op families must find it, in the mixed shape variants only, and nothing else on this backend."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from fpdiff.backends.base import TORCH, Backend, Prepared

BUG = 1.25
_SCATTERS = ("scatter", "index_put")  # aten.scatter.src/.value, scatter_add, scatter_reduce, index_put


def _is_scatter(target) -> bool:
    return any(s in str(target) for s in _SCATTERS)


def mixed_scatter(program) -> bool:
    """The exported program scatters into data whose dims mix symbolic and static sizes (> 1)."""
    for node in program.graph.nodes:
        if node.op != "call_function" or not _is_scatter(node.target) or not node.args:
            continue
        val = getattr(node.args[0], "meta", {}).get("val")
        if not isinstance(val, torch.Tensor):
            continue
        symbolic = [not isinstance(s, int) for s in val.shape]
        static = [isinstance(s, int) and s > 1 for s in val.shape]
        if any(symbolic) and any(static):
            return True
    return False


class _Planted(TorchDispatchMode):
    """Every aten op as torch computes it, scatters scaled."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * BUG if _is_scatter(func) and isinstance(out, torch.Tensor) and out.is_floating_point() else out


class PlantedScatterBackend(Backend):
    name = "planted-scatter"
    kinds = frozenset({TORCH})
    shape_variants = True

    def prepare_task(self, task) -> Prepared:
        program = task.program()
        module, on = program.module(), mixed_scatter(program)

        def run(*inputs):
            with torch.no_grad():
                if not on:
                    return list(tree_flatten(module(*inputs))[0])
                with _Planted():
                    return list(tree_flatten(module(*inputs))[0])
        return Prepared(run, info={"planted": on})

    def repro(self, r) -> str:
        """The bundle runs this file's own code: the plugin is copied next to the script."""
        import shutil
        from pathlib import Path

        from fpdiff.backends.base import TORCH_INPUTS
        shutil.copy(Path(__file__), r.out / "planted_scatter.py")
        return TORCH_INPUTS + '''import contextlib
import importlib.util
spec = importlib.util.spec_from_file_location("planted_scatter", str(here / "planted_scatter.py"))
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)
from torch.utils._pytree import tree_flatten
mode = plugin._Planted() if plugin.mixed_scatter(program) else contextlib.nullcontext()
with torch.no_grad(), mode:
    outs = list(tree_flatten(program.module()(*xt))[0])
'''
