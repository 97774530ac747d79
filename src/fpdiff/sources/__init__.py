"""Load what the user points at (spec file, ONNX file, example:NAME) into one Source shape."""
from __future__ import annotations

from pathlib import Path

from fpdiff.core.errors import UsageError
from fpdiff.sources.base import Source, SourceRef, digest

__all__ = ["Source", "SourceRef", "digest", "load"]


def load(model: str, *, inputs: str | None = None, shapes: dict[str, list[int]] | None = None,
         seed: int = 0, keep_opset: bool = False) -> Source:
    """Resolve MODEL as given on the command line."""
    if model.startswith("example:"):
        from fpdiff.sources.examples import example_path
        return _torch_spec(example_path(model.removeprefix("example:")), label=model, seed=seed)
    path = Path(model)
    if not path.exists():
        raise UsageError(f"model file not found: {model}")
    if path.is_dir():
        raise UsageError(f"model must be a file (spec .py or .onnx), got a directory: {model}")
    if path.suffix == ".onnx":
        from fpdiff.sources.onnx_file import load_onnx
        return load_onnx(path, inputs=inputs, shapes=shapes or {}, seed=seed, keep_opset=keep_opset)
    if path.suffix == ".py":
        if inputs:
            raise UsageError("--inputs applies to ONNX models; a spec file defines inputs() itself")
        return _torch_spec(path, label=str(path), seed=seed)
    raise UsageError(f"unknown model kind {path.suffix!r}: give a spec .py file, an .onnx file or example:NAME")


def _torch_spec(path: Path, label: str, seed: int) -> Source:
    from fpdiff.sources.spec import load_spec
    return load_spec(path, label=label, seed=seed)
