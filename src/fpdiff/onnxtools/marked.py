"""An ONNX graph with every float value its nodes produce marked as a graph output, for a backend that runs it in one
go (Backend.prepare_marked): the values locate --mark-all compares tensor by tensor."""
from __future__ import annotations

from typing import Any

from fpdiff.onnxtools.dtypes import FLOATS


def float_values(model: Any) -> tuple[Any, list[str]]:
    """(the model with shapes inferred, the float tensors its nodes produce, in graph order): only those whose type
    shape inference knows, since an output needs one."""
    import onnx
    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    names = [o for node in inferred.graph.node for o in node.output
             if o in typed and typed[o].type.tensor_type.elem_type in FLOATS]
    return inferred, list(dict.fromkeys(names))


def marked(model: Any) -> tuple[Any, list[str]]:
    """(a copy of the model whose outputs are every float value its nodes produce, their names in graph order)."""
    import onnx
    inferred, names = float_values(model)
    typed = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    out = onnx.ModelProto()
    out.CopyFrom(inferred)
    present = {o.name for o in out.graph.output}
    out.graph.output.extend(typed[n] for n in names if n not in present)
    return out, names
