"""The ONNX reference evaluator (numpy): float64 judge and per-precision baseline for ONNX models."""
from __future__ import annotations

from typing import Any

from fpdiff.backends import to_numpy
from fpdiff.backends.base import ONNX, TORCH, Backend, Prepared, Task
from fpdiff.core.errors import Unsupported
from fpdiff.onnxtools.graph import float64_ops, graph_inputs
from fpdiff.onnxtools.marked import float_values


class OnnxRefBackend(Backend):
    name = "onnxref"
    kinds = frozenset({TORCH, ONNX})
    judges = frozenset({ONNX})  # the float64 judge and per-precision baseline of ONNX models
    requires = ("onnx.reference",)

    def prepare_task(self, task: Task) -> Prepared:
        ev, names, _ = self._evaluator(task)
        prepared = Prepared(lambda *inputs: _run(ev, prepared, task, dict(zip(names, inputs))))
        return prepared

    def prepare_marked(self, task: Task) -> Prepared:
        """Every float value the graph's nodes produce, from one evaluation (the evaluator keeps them all)."""
        ev, names, model = self._evaluator(task)
        _, marked = float_values(model)

        def run(*inputs: Any) -> list[Any]:
            values = _run(ev, prepared, task, dict(zip(names, inputs)), intermediate=True)
            return [values[m] for m in marked]
        prepared = Prepared(run, output_names=marked)
        return prepared

    @staticmethod
    def _evaluator(task: Task) -> tuple[Any, list[str], Any]:
        """The evaluator on the cell's graph (an ONNX source's opset conversion: the evaluator misreads old opsets;
        an `.onnx` program as written), the inputs it is fed, and the graph."""
        import onnx

        from fpdiff.onnxtools.evaluator import evaluator
        if task.device != "cpu":
            raise Unsupported("the ONNX reference evaluator runs on the CPU only")
        model = onnx.load(str(task.onnx_file(judge=True)))
        return evaluator(model, new_ops=float64_ops()), graph_inputs(model), model


def _run(ev: Any, prepared: Prepared, task: Task, feeds: dict[str, Any], intermediate: bool = False) -> Any:
    """One evaluation; a node that fails is recorded in the cell's info (FAILED_NODE) before the error goes on."""
    from fpdiff.onnxtools.evaluator import FAILED_NODE, EvaluatorNodeError
    try:
        return ev.run(None, {n: to_numpy(t) for n, t in feeds.items()}, intermediate=intermediate)
    except EvaluatorNodeError as e:
        prepared.info[FAILED_NODE] = {**e.info(), "graph": str(task.onnx_file(judge=True))}
        raise
