"""ONNX files: inputs from an npz, or generated from the graph signature with a seeded generator."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UsageError
from . import Source, SourceRef, digest


def read_model(path: Path):
    import onnx
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as e:
        raise UsageError(f"cannot read ONNX file {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from e
    return model


def graph_inputs(model) -> list:
    """Real inputs: graph inputs that are not initializers (old exporters list weights as inputs too)."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def _signature(vi) -> tuple[np.dtype, list]:
    import onnx
    tt = vi.type.tensor_type
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    except Exception:
        raise UsageError(f"input {vi.name!r} has an element type fpdiff cannot generate") from None
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return dtype, dims


def load_onnx(path: Path, *, inputs: str | None, shapes: dict[str, list[int]], seed: int) -> Source:
    model = read_model(path)
    sig = {vi.name: _signature(vi) for vi in graph_inputs(model)}
    unknown = set(shapes) - set(sig)
    if unknown:
        raise UsageError(f"--shape names unknown inputs {sorted(unknown)}; the model's inputs: {list(sig)}")
    arrays = _from_npz(Path(inputs), sig) if inputs else _generate(sig, shapes, seed)
    names = list(sig)
    fp = digest(path.read_bytes(), *(arrays[n].tobytes() for n in names))
    return Source(SourceRef("onnx", str(path.resolve()), str(path)), tuple(arrays[n] for n in names), names,
                  module=model, fingerprint=fp)


def _from_npz(path: Path, sig: dict) -> dict[str, np.ndarray]:
    if not path.exists():
        raise UsageError(f"inputs file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:
        raise UsageError(f"cannot read inputs file {path}: {e}") from e
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


def _generate(sig: dict, shapes: dict[str, list[int]], seed: int) -> dict[str, np.ndarray]:
    """Floats ~ N(0, 1); integers uniform in [0, 10) (small: indices and token ids stay valid); bools fair coins."""
    rng = np.random.default_rng(seed)
    out = {}
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
        elif dtype.kind in "iu":
            out[name] = rng.integers(0, 10, size=shape).astype(dtype)
        elif dtype.kind == "b":
            out[name] = rng.random(shape) < 0.5
        else:
            raise UsageError(f"input {name!r}: cannot generate values of dtype {dtype}")
    return out
