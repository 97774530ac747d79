"""A backend that declares every capability a plugin can and computes every model itself, then adds a known shift to
each float value it hands back: SHIFT times the value's own root mean square (the flag `shift=X` sets another). Its
numbers are therefore off by a relative L2 of exactly the shift, and fpdiff must report exactly that under its name,
whatever the analysis (the flag `crash` makes its marked run abort instead). Torch models and `.pt2` programs run in
torch eager; ONNX graphs and `.onnx` programs in the ONNX reference evaluator (numpy)."""
import math

import numpy as np
import torch
from torch.utils._pytree import tree_flatten

from fpdiff.backends.base import ONNX, TORCH, Backend, Prepared

SHIFT = 0.5


def shifted(x, shift: float):
    """x + shift * rms(x) for a float tensor or array (its relative L2 from x is `shift`); other values as they are."""
    if isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            return x
        rms = float(torch.sqrt(torch.mean(x.double() ** 2))) if x.numel() else 0.0
        return x + shift * (rms if rms > 0 and math.isfinite(rms) else 1.0)
    a = np.asarray(x)
    if a.dtype.kind != "f":
        return a
    rms = float(np.sqrt(np.mean(a.astype(np.float64) ** 2))) if a.size else 0.0
    return np.asarray(a + shift * (rms if rms > 0 and math.isfinite(rms) else 1.0), dtype=a.dtype)


def _shift(flags) -> float:
    """The shift: SHIFT, or the value of a `shift=X` flag."""
    given = [f.removeprefix("shift=") for f in flags if f.startswith("shift=")]
    return float(given[-1]) if given else SHIFT


def _numpy(t):
    return t.numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


class _Shifted(Backend):
    """Cells and marked runs, in a worker: the lifecycle every analysis can reach through a job."""
    kinds = frozenset({TORCH, ONNX})
    shape_variants = True
    takes_flags = True
    independent = True  # its numbers are its own: a witness when the judge is in doubt

    def prepare_task(self, task) -> Prepared:
        shift = _shift(task.flags)
        if task.is_torch:  # the cell's program: cast, the autocast graph under amp-*, or a program as written
            module = task.program().module()

            def run_torch(*inputs):
                with torch.no_grad():
                    outs = tree_flatten(module(*inputs))[0]
                return [shifted(o, shift) for o in outs]
            return Prepared(run_torch)
        ev, names, _ = self._evaluator(task)

        def run_onnx(*inputs):
            return [shifted(o, shift) for o in ev.run(None, {n: _numpy(t) for n, t in zip(names, inputs)})]
        return Prepared(run_onnx)

    def prepare_marked(self, task) -> Prepared:
        """Every float value of the cell's ONNX graph, shifted as its outputs are."""
        from fpdiff.onnxtools.marked import float_values
        shift = _shift(task.flags)
        ev, names, model = self._evaluator(task)
        _, marked = float_values(model)

        def run(*inputs):
            if "crash" in task.flags:  # a native crash in the marked run: it must cost this answer, not the run
                import os
                os.abort()
            values = ev.run(None, {n: _numpy(t) for n, t in zip(names, inputs)}, intermediate=True)
            return [shifted(values[m], shift) for m in marked]
        return Prepared(run, output_names=marked)

    artifacts = (".onnx",)  # the user's own ONNX file, run by the reference evaluator and shifted

    def read_artifact(self, path):
        from fpdiff.backends.ort import read_onnx
        return read_onnx(path)

    def prepare_artifact(self, task, path) -> Prepared:
        import onnx
        from onnx.reference import ReferenceEvaluator
        shift = _shift(task.flags)
        model = onnx.load(str(path))
        inits = {t.name for t in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in inits]
        ev = ReferenceEvaluator(model)

        def run(*inputs):
            return [shifted(o, shift) for o in ev.run(None, {n: _numpy(t) for n, t in zip(names, inputs)})]
        return Prepared(run)

    @staticmethod
    def _evaluator(task):
        import onnx
        from onnx.reference import ReferenceEvaluator
        model = onnx.load(str(task.onnx_file()))
        inits = {t.name for t in model.graph.initializer}
        return ReferenceEvaluator(model), [i.name for i in model.graph.input if i.name not in inits], model


class ShiftedBackend(_Shifted):
    """Every capability: plan's trials of a torch model run here, through prepare_module."""
    name = "shifted"

    def prepare_module(self, module, device: str, flags=()) -> Prepared:
        shift = _shift(flags)

        def run(*inputs):
            with torch.no_grad():
                outs = tree_flatten(module(*(t.to(device) for t in inputs)))[0]
            return [shifted(o.cpu(), shift) for o in outs]
        return Prepared(run)


class ShiftedJobsBackend(_Shifted):
    """The same numbers without prepare_module: plan's trials go to a worker as program jobs."""
    name = "shifted-jobs"
