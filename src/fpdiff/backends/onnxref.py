"""The ONNX reference evaluator (numpy): float64 judge and per-precision baseline for ONNX models."""
from __future__ import annotations

from . import to_numpy
from .base import ONNX, TORCH, Backend, Prepared


class OnnxRefBackend(Backend):
    name = "onnxref"
    kinds = frozenset({TORCH, ONNX})

    def available(self) -> str | None:
        try:
            from onnx.reference import ReferenceEvaluator  # noqa: F401
        except ImportError as e:
            return f"onnx.reference does not import: {e}"
        return None

    def prepare_task(self, task) -> Prepared:
        import onnx
        from onnx.reference import ReferenceEvaluator

        from ..errors import Unsupported
        if task.device != "cpu":
            raise Unsupported("the ONNX reference evaluator runs on the CPU only")
        model = onnx.load(str(task.onnx_file()))
        ev = ReferenceEvaluator(model, new_ops=float64_ops())
        names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]

        def run(*inputs):
            return ev.run(None, {n: to_numpy(t) for n, t in zip(names, inputs)})
        return Prepared(run)


def float64_ops() -> list:
    """Kernels that compute in the input's dtype: the evaluator's own Erf is float32 (np.vectorize with
    otypes "f"), and its Gelu expands into float32 constants, which would make the float64 judge a float32 one."""
    import math

    import numpy as np
    from onnx.reference.op_run import OpRun

    erf = np.vectorize(math.erf, otypes=[np.float64])

    class Erf(OpRun):
        op_domain = ""

        def _run(self, x):
            return (erf(x).astype(x.dtype),)

    class Gelu(OpRun):
        op_domain = ""

        def _run(self, x, approximate="none"):
            x64 = x.astype(np.float64)
            if approximate == "tanh":
                y = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
            else:
                y = 0.5 * x64 * (1 + erf(x64 / math.sqrt(2)))
            return (y.astype(x.dtype),)

    return [Erf, Gelu]
