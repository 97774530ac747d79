"""Load what the user points at (spec file, ONNX file, example:NAME) into one Source shape."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError


@dataclass(frozen=True)
class SourceRef:
    """Picklable address of a model, enough for a child process to load it again."""
    kind: str  # "torch" (spec file or example) or "onnx"
    path: str
    label: str


@dataclass
class Source:
    ref: SourceRef
    inputs: tuple  # torch.Tensor for torch sources, np.ndarray for ONNX sources
    input_names: list[str]
    dynamic_shapes: object = None  # torch.export form, torch sources only
    tolerance: dict[str, float] = field(default_factory=dict)
    module: object = None  # nn.Module (torch) or onnx.ModelProto (onnx)
    fingerprint: str = ""
    notes: dict = field(default_factory=dict)  # how it was brought in: opset conversion, how inputs were made


def load(model: str, *, inputs: str | None = None, shapes: dict[str, list[int]] | None = None,
         seed: int = 0, keep_opset: bool = False) -> Source:
    """Resolve MODEL as given on the command line."""
    if model.startswith("example:"):
        from .examples import example_path
        return _torch_spec(example_path(model.removeprefix("example:")), label=model, seed=seed)
    path = Path(model)
    if not path.exists():
        raise UsageError(f"model file not found: {model}")
    if path.is_dir():
        raise UsageError(f"model must be a file (spec .py or .onnx), got a directory: {model}")
    if path.suffix == ".onnx":
        from .onnx_file import load_onnx
        return load_onnx(path, inputs=inputs, shapes=shapes or {}, seed=seed, keep_opset=keep_opset)
    if path.suffix == ".py":
        if inputs:
            raise UsageError("--inputs applies to ONNX models; a spec file defines inputs() itself")
        return _torch_spec(path, label=str(path), seed=seed)
    raise UsageError(f"unknown model kind {path.suffix!r}: give a spec .py file, an .onnx file or example:NAME")


def _torch_spec(path: Path, label: str, seed: int) -> Source:
    from .spec import load_spec
    return load_spec(path, label=label, seed=seed)


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:20]
