"""The ONNX reference evaluator as fpdiff runs it: a node whose kernel raises is named in the failure (its op type,
name, opset and the exception, in one line), so a failed judge points at the op to repro instead of a bare
exception from deep inside numpy."""
from __future__ import annotations

import functools
from typing import Any

from onnx.reference import ReferenceEvaluator

from fpdiff.core.errors import MESSAGE_CHARS, RUN, StageError

COMPONENT = "onnx reference evaluator"
# The key under which a cell's info records the node its evaluation failed at (EvaluatorNodeError.info, with the
# graph the evaluator ran): what a one-node repro is made from.
FAILED_NODE = "evaluator_failed_at"


class EvaluatorNodeError(StageError):
    """The reference evaluator failed at one node: the judge's own failure (a kernel of the evaluator raised on a
    well-formed graph), not the user's input. Carries the node, for a one-node repro."""

    def __init__(self, op_type: str, node: str, opset: int | None, domain: str, outputs: list[str], kernel: str,
                 cause: BaseException):
        self.op_type, self.node, self.opset, self.domain, self.outputs = op_type, node, opset, domain, outputs
        self.kernel = kernel  # the module whose code raised: onnx's evaluator, or fpdiff's kernels (refkernels.py)
        self.error = f"{type(cause).__name__}: {' '.join(str(cause).split())[:MESSAGE_CHARS]}".rstrip(": ")
        super().__init__(RUN, COMPONENT, f"the ONNX reference evaluator failed at {self.where()}: {self.error}",
                         op=op_type)

    def where(self) -> str:
        """`Op node 'name' (opset N)`; an unnamed node by its first output, another domain's op with its domain."""
        label = repr(self.node) if self.node else f"(unnamed, output {self.outputs[0]!r})" if self.outputs else ""
        domain = "" if self.domain in ("", "ai.onnx") else f"{self.domain} "
        own = ", fpdiff's kernel" if self.kernel.startswith("fpdiff.") else ""
        return f"{self.op_type} node {label} ({domain}opset {self.opset}{own})"

    def info(self) -> dict[str, Any]:
        """The failing node as a job's info records it: what a one-node repro is built from."""
        return {"op_type": self.op_type, "node": self.node, "opset": self.opset, "domain": self.domain,
                "outputs": self.outputs, "kernel": self.kernel, "error": self.error}


class NamingEvaluator(ReferenceEvaluator):
    """ReferenceEvaluator whose nodes (subgraphs' and functions' too: they are built with this class) name
    themselves when their kernel raises, fpdiff's own kernels too (they raise where the evaluator's would, and a bug
    of theirs is still a failed judge at that node: the message says whose kernel it was)."""

    def _init(self) -> None:
        super()._init()
        for node in self.rt_nodes_:
            node.run = functools.partial(_named_run, node, node.run)


def _named_run(node: Any, run: Any, *args: Any, **kwargs: Any) -> Any:
    """The node's run; what its kernel raises comes back as an EvaluatorNodeError naming it."""
    try:
        return run(*args, **kwargs)
    except EvaluatorNodeError:  # a node inside this one's subgraph, already named
        raise
    except Exception as e:
        proto = node.onnx_node
        opset = ((getattr(node, "run_params", None) or {}).get("opsets") or {}).get(proto.domain)
        raise EvaluatorNodeError(proto.op_type, proto.name, opset, proto.domain, list(proto.output), _raiser(e),
                                 e) from e


def _raiser(e: BaseException) -> str:
    """The module of the innermost onnx or fpdiff frame the exception passed through: whose kernel raised it (a
    kernel of fpdiff's may inherit a path from onnx's, and numpy's frames below either belong to neither)."""
    found, tb = "", e.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module.startswith(("onnx.", "fpdiff.")):
            found = module
        tb = tb.tb_next
    return found


def evaluator(model: Any, new_ops: list | None = None) -> NamingEvaluator:
    """The reference evaluator on `model` with `new_ops`, naming the node that fails."""
    return NamingEvaluator(model, new_ops=new_ops)
