"""ONNX files: inputs from an npz, or generated from the graph signature with a seeded generator."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fpdiff.core.errors import UsageError
from fpdiff.core.paths import cache_root
from fpdiff.sources.base import Source, SourceRef, digest
from fpdiff.sources.npz import read_npz


def read_model(path: Path):
    import onnx
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"cannot read ONNX file {path}: {why}") from e
    return model


def graph_inputs(model) -> list:
    """Real inputs: graph inputs that are not initializers (old exporters list weights as inputs too)."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def _signature(vi) -> tuple[np.dtype, list]:
    """(dtype, dims) of a graph input; a dim with no value (exporters write -1 or nothing for "any") is "?"."""
    import onnx
    tt = vi.type.tensor_type
    if tt.elem_type == onnx.TensorProto.STRING:  # one answer, whichever way inputs would come in
        raise UsageError(f"input {vi.name!r} takes strings: fpdiff judges numeric tensors and hands every input to "
                         "the backends as one, so it cannot check a model with string inputs (from --inputs or "
                         "generated); check the numeric part of the graph after the string ops")
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except Exception:
        raise UsageError(f"input {vi.name!r} has an element type fpdiff cannot generate") from None
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else (d.dim_param or "?") for d in tt.shape.dim]
    return dtype, dims


def load_onnx(path: Path, *, inputs: str | None, shapes: dict[str, list[int]], seed: int,
              keep_opset: bool = False) -> Source:
    model = read_model(path)
    sig = {vi.name: _signature(vi) for vi in graph_inputs(model)}
    unknown = set(shapes) - set(sig)
    if unknown:
        raise UsageError(f"--shape names unknown inputs {sorted(unknown)}; the model's inputs: {list(sig)}")
    if inputs:
        arrays = _from_npz(Path(inputs), sig)
        how = {n: f"from {inputs}" for n in sig}
    else:
        arrays, how = _generate(sig, shapes, seed, index_bounds(model))
    names = list(sig)
    fp = digest(path.read_bytes(), *(arrays[n].tobytes() for n in names))

    from fpdiff.sources.opset import default_opset, upgrade
    if keep_opset:
        converted, conversion = None, {"opset": default_opset(model), "status": "kept as given (--keep-opset)"}
    else:
        model, converted, conversion = upgrade(model, arrays, cache_root() / "opset", fp)
    run_path = converted or path.resolve()
    if converted:  # another graph: its compiled artifacts must not be taken for the original's
        fp = digest(fp, converted.name)
    ref = SourceRef("onnx", str(run_path), str(path), original=str(path.resolve()) if converted else "")
    return Source(ref, tuple(arrays[n] for n in names), names, dynamic_shapes=declared_dims(model),
                  module=model, fingerprint=fp, notes={"conversion": conversion, "inputs": how})


def declared_dims(model) -> dict | None:
    """The graph's symbolic input dims in torch.export's dynamic_shapes form ({input: {axis: Dim}}, one Dim per
    dim_param, shared where inputs share it): the shape variants a check runs (static pins them all, dynamic keeps
    the graph as written). None when every input dim is fixed."""
    import torch

    from fpdiff.onnxtools.shapes import symbolic_dims
    found = symbolic_dims(model)
    made: dict[str, object] = {}
    return {name: {axis: made.setdefault(d, torch.export.Dim(d)) for axis, d in dims.items()}
            for name, dims in found.items()} or None


def _from_npz(path: Path, sig: dict) -> dict[str, np.ndarray]:
    data = read_npz(path)
    missing = [n for n in sig if n not in data]
    if missing:
        raise UsageError(f"inputs file {path} lacks arrays for inputs {missing} (it has {sorted(data)})")
    for name, (dtype, dims) in sig.items():
        a = data[name]
        if a.ndim != len(dims) or any(isinstance(d, int) and d != s for d, s in zip(dims, a.shape)):
            raise UsageError(f"input {name!r}: array shape {list(a.shape)} does not fit the model's {dims}")
        if a.dtype != dtype:
            raise UsageError(f"input {name!r}: array dtype {a.dtype} but the model takes {dtype}")
    return {n: data[n] for n in sig}


# Ops through which an integer input reaches a Gather unchanged in value (token ids reshaped or cast on the way).
_PASS_VALUES = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand"}


def index_bounds(model) -> dict[str, tuple[int, str]]:
    """Integer graph inputs used as Gather indices: (rows of the smallest table they index, which table), so
    generated token ids stay inside every embedding they feed (a 2-row token-type table takes only 0 and 1)."""
    inits = {t.name: list(t.dims) for t in model.graph.initializer}
    consumers: dict[str, list] = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    bounds: dict[str, tuple[int, str]] = {}
    for vi in graph_inputs(model):
        seen, todo = set(), [vi.name]
        while todo:
            name = todo.pop()
            for node, i in consumers.get(name, []):
                if node.op_type in _PASS_VALUES and i == 0 and node.output[0] not in seen:
                    seen.add(node.output[0])
                    todo.append(node.output[0])
                elif node.op_type == "Gather" and i == 1 and node.input[0] in inits:
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    dims = inits[node.input[0]]
                    rows = dims[axis] if -len(dims) <= axis < len(dims) else 0
                    if rows > 0 and (vi.name not in bounds or rows < bounds[vi.name][0]):
                        bounds[vi.name] = (rows, node.input[0])
    return bounds


def _generate(sig: dict, shapes: dict[str, list[int]], seed: int,
              bounds: dict[str, tuple[int, str]] | None = None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Floats ~ N(0, 1); indices uniform over the table they index; other integers uniform in [0, 10) (small:
    lengths and ids stay valid); bools fair coins. Also says, per input, how it was made."""
    rng = np.random.default_rng(seed)
    bounds = bounds or {}
    out, how = {}, {}
    for name, (dtype, dims) in sig.items():
        if name in shapes:
            shape = shapes[name]
            if len(shape) != len(dims) or any(isinstance(d, int) and d != s for d, s in zip(dims, shape)):
                raise UsageError(f"--shape {name}={','.join(map(str, shape))} does not fit the model's {dims}")
        elif all(isinstance(d, int) for d in dims):
            shape = dims
        else:
            raise UsageError(f"input {name!r} has symbolic dims {dims}: give its shape with --shape {name}=D0,D1,...")
        if dtype.kind == "f":
            out[name] = rng.standard_normal(shape).astype(dtype)
            how[name] = f"normal N(0, 1), {dtype}"
        elif dtype.kind in "iu" and name in bounds:
            rows, table = bounds[name]
            out[name] = rng.integers(0, rows, size=shape).astype(dtype)
            how[name] = f"uniform integers in [0, {rows}): indices into {table!r} ({rows} rows)"
        elif dtype.kind in "iu":
            out[name] = rng.integers(0, 10, size=shape).astype(dtype)
            how[name] = "uniform integers in [0, 10)"
        elif dtype.kind == "b":
            out[name] = rng.random(shape) < 0.5
            how[name] = "fair coins"
        else:
            raise UsageError(f"input {name!r}: cannot generate values of dtype {dtype}")
    return out, how
