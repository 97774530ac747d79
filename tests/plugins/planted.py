"""A backend with one planted bug: it computes every model itself (torch programs in torch eager, ONNX graphs in
the ONNX reference evaluator) and is right, except for average pooling with ceil_mode, whose outputs it returns
scaled by 1.25 (ceil_mode's last window, which hangs off the edge, is where real pooling kernels go wrong). The op
sweep must find exactly those cells, and nothing else, on this backend."""
import numpy as np
import torch
from torch.utils._pytree import tree_flatten

from fpdiff.backends.base import ONNX, TORCH, Backend, Prepared

BUG = 1.25


def _planted_torch(program) -> bool:
    """The exported program pools with ceil_mode (aten.avg_pool{1,2,3}d's fifth argument)."""
    for node in program.graph.nodes:
        if node.op == "call_function" and "avg_pool" in str(node.target):
            ceil = node.args[4] if len(node.args) > 4 else node.kwargs.get("ceil_mode", False)
            if ceil:
                return True
    return False


def _planted_onnx(model) -> bool:
    """The graph has an AveragePool with ceil_mode=1."""
    return any(n.op_type == "AveragePool" and any(a.name == "ceil_mode" and a.i for a in n.attribute)
               for n in model.graph.node)


def _scaled(x, on: bool):
    if not on:
        return x
    if isinstance(x, torch.Tensor):
        return x * BUG if x.is_floating_point() else x
    a = np.asarray(x)
    return (a * BUG).astype(a.dtype) if a.dtype.kind == "f" else a


class PlantedBackend(Backend):
    name = "planted"
    kinds = frozenset({TORCH, ONNX})
    shape_variants = True

    def prepare_task(self, task) -> Prepared:
        if task.is_torch:
            program = task.program()
            module, on = program.module(), _planted_torch(program)

            def run_torch(*inputs):
                with torch.no_grad():
                    return [_scaled(o, on) for o in tree_flatten(module(*inputs))[0]]
            return Prepared(run_torch)
        import onnx
        from onnx.reference import ReferenceEvaluator
        model = onnx.load(str(task.onnx_file()))
        inits = {t.name for t in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in inits]
        ev, on = ReferenceEvaluator(model), _planted_onnx(model)

        def run_onnx(*inputs):
            feed = {n: t.numpy() if isinstance(t, torch.Tensor) else np.asarray(t) for n, t in zip(names, inputs)}
            return [_scaled(o, on) for o in ev.run(None, feed)]
        return Prepared(run_onnx)

    def repro(self, r) -> str:
        """The bundle runs this file's own code: the plugin is copied next to the script."""
        import shutil
        from pathlib import Path

        from fpdiff.backends.base import NUMPY_INPUTS, TORCH_INPUTS
        shutil.copy(Path(__file__), r.out / "planted.py")
        load = '''import importlib.util
spec = importlib.util.spec_from_file_location("planted", str(here / "planted.py"))
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)
'''
        if not r.onnx_segment:
            return TORCH_INPUTS + load + '''from torch.utils._pytree import tree_flatten
on = plugin._planted_torch(program)
with torch.no_grad():
    outs = [plugin._scaled(o, on) for o in tree_flatten(program.module()(*xt))[0]]
'''
        return NUMPY_INPUTS + load + '''import onnx
from onnx.reference import ReferenceEvaluator
model = onnx.load(str(here / "segment.onnx"))
inits = {t.name for t in model.graph.initializer}
names = [i.name for i in model.graph.input if i.name not in inits]
feed = {n: as_np(x, d) for n, x, d in zip(names, xs, meta["input_dtypes"])}
on = plugin._planted_onnx(model)
outs = [plugin._scaled(o, on) for o in ReferenceEvaluator(model).run(None, feed)]
'''
