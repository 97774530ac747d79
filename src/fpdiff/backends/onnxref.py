"""The ONNX reference evaluator (numpy): float64 judge and per-precision baseline for ONNX models."""
from __future__ import annotations

from fpdiff.backends import to_numpy
from fpdiff.backends.base import ONNX, TORCH, Backend, Prepared
from fpdiff.onnxtools.graph import float64_ops, graph_inputs


class OnnxRefBackend(Backend):
    name = "onnxref"
    kinds = frozenset({TORCH, ONNX})

    requires = ("onnx.reference",)

    def prepare_task(self, task) -> Prepared:
        import onnx
        from onnx.reference import ReferenceEvaluator

        from fpdiff.core.errors import Unsupported
        if task.device != "cpu":
            raise Unsupported("the ONNX reference evaluator runs on the CPU only")
        model = onnx.load(str(task.onnx_file(judge=True)))  # the conversion: it misreads old opsets
        ev = ReferenceEvaluator(model, new_ops=float64_ops())
        names = graph_inputs(model)

        def run(*inputs):
            return ev.run(None, {n: to_numpy(t) for n, t in zip(names, inputs)})
        return Prepared(run)
