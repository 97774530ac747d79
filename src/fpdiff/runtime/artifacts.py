"""The user's own converted file on a backend (`--artifact BACKEND=PATH`): the model's inputs matched to the file's
by name, then by position, and fed in the file's own dtypes. The parent matches before any job (a mismatch is one
line, exit 2); the worker matches again the same way to feed the file."""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fpdiff.backends.base import Artifact, Backend, Prepared, TensorSpec
from fpdiff.core.errors import UsageError

# numpy's names of the dtypes a file may declare, as torch dtypes
_TORCH = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
          "uint8": torch.uint8, "bool": torch.bool}


def read(backend: Backend, path: str) -> Artifact:
    """The file's declaration, or one line: no such file, a suffix the backend does not run, a file it cannot read."""
    p = Path(path)
    if backend.artifacts and not any(path.endswith(s) for s in backend.artifacts):
        raise UsageError(f"--artifact {backend.name}={path}: {backend.name} runs {', '.join(backend.artifacts)} "
                         "files")
    if not p.exists():
        raise UsageError(f"--artifact {backend.name}={path}: no such file")
    try:
        with _quiet():
            return backend.read_artifact(p)
    except UsageError:
        raise
    except Exception as e:  # the runtime's own words say what is wrong with the file
        text = " ".join(str(e).split())[:300]
        raise UsageError(f"--artifact {backend.name}={path}: {backend.name} cannot read it ({type(e).__name__}: "
                         f"{text})") from None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """A runtime's import chatter (warnings written from C++ and by its dependencies) kept off the terminal: reading
    a file's declaration in the parent must leave the report and a usage error's one line alone."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def order(names: Sequence[str], inputs: Sequence[Any], art: Artifact) -> list[int]:
    """For each of the file's inputs, the index of the model's input that feeds it: by name when the file names
    every one of them as the model does, else by position; a count, shape or kind of dtype that cannot match is
    one line."""
    where = f"the artifact {Path(art.path).name}"
    inputs = [_tensor(x) for x in inputs]
    if len(art.inputs) != len(inputs):
        raise UsageError(f"{where} takes {len(art.inputs)} inputs ({', '.join(s.name for s in art.inputs)}); the "
                         f"model has {len(inputs)} ({', '.join(names)})")
    by_name = all(s.name in names for s in art.inputs)
    picked = [list(names).index(s.name) if by_name else i for i, s in enumerate(art.inputs)]
    for spec, i in zip(art.inputs, picked):
        _check(spec, names[i], inputs[i], where)
    return picked


def _check(spec: TensorSpec, name: str, x: Any, where: str) -> None:
    """One input against the file's declaration: the same shape (a dynamic dim takes any size), the same kind of
    dtype (a float input is fed at the file's float dtype, an integer one at its integer width)."""
    shape = tuple(x.shape)
    if len(shape) != len(spec.shape) or any(d is not None and d != s for d, s in zip(spec.shape, shape)):
        dims = "x".join("?" if d is None else str(d) for d in spec.shape)
        raise UsageError(f"{where}'s input {spec.name!r} is {dims}; the model's {name!r} is "
                         f"{'x'.join(map(str, shape)) or 'a scalar'}")
    if spec.dtype not in _TORCH:
        raise UsageError(f"{where}'s input {spec.name!r} is {spec.dtype}, which fpdiff cannot feed")
    want = _TORCH[spec.dtype]
    if want.is_floating_point != x.is_floating_point() or (want == torch.bool) != (x.dtype == torch.bool):
        raise UsageError(f"{where}'s input {spec.name!r} is {spec.dtype}; the model's {name!r} is "
                         f"{str(x.dtype).removeprefix('torch.')}")


def feeds(names: Sequence[str], inputs: Sequence[Any], art: Artifact) -> tuple[Any, ...]:
    """The model's inputs in the file's order, each in the file's declared dtype."""
    return tuple(_tensor(inputs[i]).to(_TORCH[s.dtype]) for s, i in zip(art.inputs, order(names, inputs, art)))


def _tensor(x: Any) -> torch.Tensor:
    """A model's input as a tensor: an ONNX source holds numpy arrays."""
    return x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))


def onnx_artifact(path: Path) -> Artifact:
    """A quantized ONNX file's declared inputs and outputs, read by onnx itself: every backend that runs one is
    handed the same graph, whether or not it reads converted files of its own."""
    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    from fpdiff.core import precision as prec
    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}

    def spec(v: Any) -> TensorSpec:
        t = v.type.tensor_type
        # a dim of -1 is no size (exporters such as Paddle's write it for a dynamic one): it takes any, like a name
        dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None for d in t.shape.dim)
        try:
            dtype = str(tensor_dtype_to_np_dtype(t.elem_type))
        except (KeyError, ValueError, TypeError):
            dtype = f"onnx type {t.elem_type}"
        return TensorSpec(v.name, dims, dtype)
    return Artifact(str(path), [spec(v) for v in m.graph.input if v.name not in inits],
                    [spec(v) for v in m.graph.output], prec.FP32, "a quantized ONNX file")


# The integer types a quantized file's input can be held in: a float input quantized by its first step (a
# full-integer .tflite takes int8), which fpdiff feeds as the float it is and the backend quantizes as the file says
QUANTIZED_INPUTS = ("int8", "uint8", "int16")


def fed_float(art: Artifact) -> Artifact:
    """A quantized file's declaration with its integer inputs fed as float (QUANTIZED_INPUTS)."""
    inputs = [dataclasses.replace(s, dtype="float32") if s.dtype in QUANTIZED_INPUTS else s for s in art.inputs]
    return dataclasses.replace(art, inputs=inputs)


def quantized_preparer(backend: Backend, path: str | None) -> Callable[[Any], Prepared]:
    """A worker's prepare step for a quantized cell: the backend quantizes the model with its own tool, or runs the
    user's quantized file (`path`) fed the model's inputs in the file's order and dtypes."""
    def prepare(task: Any) -> Prepared:
        if path is None:
            return backend.prepare_quantized(task)
        art = onnx_artifact(Path(path)) if path.endswith(".onnx") else fed_float(read(backend, path))
        prepared = backend.prepare_quantized(dataclasses.replace(task, given=path))
        prepared.feeds = feeds(task.source.input_names, task.source.inputs, art)
        prepared.artifact = Path(path)
        return prepared
    return prepare


def preparer(backend: Backend, path: str) -> Callable[[Any], Prepared]:
    """A worker's prepare step for a cell of the user's file: the backend runs the file, fed the model's inputs
    (as given, before any cast to the cell's precision) in the file's order and dtypes."""
    def prepare(task: Any) -> Prepared:
        art = read(backend, path)
        prepared = backend.prepare_artifact(task, Path(path))
        prepared.feeds = feeds(task.source.input_names, task.source.inputs, art)
        prepared.artifact = Path(path)
        prepared.info = {"artifact": str(path), "artifact_precision": f"{art.precision.name}: {art.why}",
                         **prepared.info}
        return prepared
    return prepare
