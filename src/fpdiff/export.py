"""torch -> ONNX, and ONNX -> another float dtype: stages that can change numbers, so they are never trusted."""
from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .errors import Unsupported

FLOATS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
ONNX_TYPE = {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
             "bfloat16": TensorProto.BFLOAT16}


def onnx_for(task) -> Path:
    """The cell's ONNX graph, cached: exported from the cast torch program, or the ONNX source cast."""
    if task.is_torch:
        return task.cache.get_or_build(*task.key("onnx-export"), suffix=".onnx",
                                       build=lambda p: export_program(task.program(), p))[0]
    if not task.precision.is_cast:
        raise Unsupported("autocast is a torch policy; an ONNX model has no autocast form")
    target = ONNX_TYPE[task.requested_dtype]
    return task.cache.get_or_build(*task.key("onnx-cast"), suffix=".onnx",
                                   build=lambda p: onnx.save(cast_model(task.source.onnx, target), str(p)))[0]


def export_program(program, path: Path) -> None:
    """torch.onnx's dynamo exporter, optimizer off: its constant folding deletes `x + 1e-8` (a real number change)."""
    import logging

    import torch
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed" and such
    with contextlib.redirect_stdout(io.StringIO()):
        onnx_program = torch.onnx.export(program, (), dynamo=True, optimize=False, verbose=False)
    onnx_program.save(str(path))


def cast_model(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """Every float tensor of the graph in `target` (like .half() on a torch model): initializers, inputs,
    outputs, Cast targets and constants. Attributes such as epsilon stay as the op defines them."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    _cast_graph(m.graph, target)
    del m.graph.value_info[:]  # stale types: let shape inference redo them
    return m


def _cast_tensor(t: onnx.TensorProto, target: int) -> None:
    if t.data_type not in FLOATS or t.data_type == target:
        return
    arr = numpy_helper.to_array(t).astype(np.float64)
    new = numpy_helper.from_array(_np_cast(arr, target), t.name)
    t.CopyFrom(new)


def _np_cast(arr: np.ndarray, target: int) -> np.ndarray:
    if target == TensorProto.BFLOAT16:
        import ml_dtypes
        return arr.astype(ml_dtypes.bfloat16)
    return arr.astype(helper.tensor_dtype_to_np_dtype(target))


def _cast_graph(g: onnx.GraphProto, target: int) -> None:
    for t in g.initializer:
        _cast_tensor(t, target)
    for vi in list(g.input) + list(g.output):
        tt = vi.type.tensor_type
        if tt.elem_type in FLOATS:
            tt.elem_type = target
    for node in g.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i in FLOATS:
                a.i = target
            elif a.type == onnx.AttributeProto.TENSOR:
                _cast_tensor(a.t, target)
            elif a.type == onnx.AttributeProto.GRAPH:
                _cast_graph(a.g, target)
            elif node.op_type == "Constant" and a.name in ("value_float", "value_floats"):
                pass  # float attributes of Constant stay float32 by the spec; a later Cast handles them
            elif a.name in ("dtype", "to") and a.type == onnx.AttributeProto.INT and a.i in FLOATS:
                a.i = target  # RandomNormal, EyeLike, ... output dtypes
