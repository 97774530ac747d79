"""An ONNX graph's symbolic dims, and the same graph with some or all of them pinned to the inputs' sizes: what a
static cell compiles (a user who deploys with fixed shapes hands the compiler a graph whose every dim is known)."""
from __future__ import annotations

import re
from collections.abc import Iterable

import onnx

Symbolic = dict[str, dict[int, str]]  # graph input -> {axis: dim name}


def dim_name(vi_name: str, axis: int, param: str) -> str:
    """A dim's name: the exporter's dim_param, made an identifier; an unnamed dim is named after its input and axis
    (nothing ties it to another input's dim)."""
    raw = param or f"{vi_name}_{axis}"
    name = re.sub(r"\W", "_", raw)
    return name if name[:1].isalpha() or name[:1] == "_" else f"d_{name}"


def symbolic_dims(model: onnx.ModelProto) -> Symbolic:
    """The graph inputs' dims that have no fixed size (weights listed as inputs excluded), by axis."""
    inits = {t.name for t in model.graph.initializer}
    out: Symbolic = {}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        dims = {i: dim_name(vi.name, i, d.dim_param) for i, d in enumerate(vi.type.tensor_type.shape.dim)
                if not (d.HasField("dim_value") and d.dim_value > 0)}
        if dims:
            out[vi.name] = dims
    return out


def pin_dims(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]], keep: Iterable[str] = ()) -> onnx.ModelProto:
    """A copy whose symbolic input dims take the inputs' sizes, except the dims named in `keep`; each pinned
    dim_param is replaced by its size wherever the graph (subgraphs included) annotates it, so an importer that
    reads value_info sees the same fixed dims its own shape inference finds."""
    keep = set(keep)
    sizes: dict[str, int] = {}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi_name, dims in symbolic_dims(m).items():
        vi = next(v for v in m.graph.input if v.name == vi_name)
        shape = shapes.get(vi_name)
        if shape is None:
            continue
        for axis, name in dims.items():
            if name in keep or axis >= len(shape):
                continue
            d = vi.type.tensor_type.shape.dim[axis]
            if d.dim_param:
                sizes[d.dim_param] = int(shape[axis])
            d.Clear()
            d.dim_value = int(shape[axis])
    if sizes:
        _substitute(m.graph, sizes)
    return m


def _substitute(g: onnx.GraphProto, sizes: dict[str, int]) -> None:
    """Every annotation of a pinned dim_param in `g` and its subgraphs becomes its size."""
    for vi in [*g.input, *g.output, *g.value_info]:
        if not vi.type.HasField("tensor_type"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in sizes:
                v = sizes[d.dim_param]
                d.Clear()
                d.dim_value = v
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _substitute(a.g, sizes)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _substitute(sub, sizes)
