"""Load what the user points at (spec file, ONNX file, exported program, Hugging Face checkpoint, example:NAME) into
one Source shape."""
from __future__ import annotations

from pathlib import Path

from fpdiff.core.errors import UsageError
from fpdiff.sources.base import Source, SourceRef, digest

__all__ = ["Source", "SourceRef", "digest", "load"]


def load(model: str, *, inputs: str | None = None, shapes: dict[str, list[int]] | None = None,
         seed: int = 0, keep_opset: bool = False, task: str | None = None) -> Source:
    """Resolve MODEL as given on the command line; a torch model's inputs are checked to fit it (sources/fit.py)."""
    source = _load(model, inputs=inputs, shapes=shapes, seed=seed, keep_opset=keep_opset, task=task)
    if source.ref.kind == "torch":
        from fpdiff.sources.fit import check_fit
        check_fit(source.module, tuple(source.inputs), list(source.input_names))
    return source


def _load(model: str, *, inputs: str | None, shapes: dict[str, list[int]] | None, seed: int, keep_opset: bool,
          task: str | None) -> Source:
    """MODEL resolved by its kind."""
    from fpdiff.sources import hf
    if task and not hf.is_hf(model):
        raise UsageError(f"--task chooses the class of a Hugging Face checkpoint (hf:DIR), not of {model}")
    if hf.is_hf(model):
        if shapes:
            raise UsageError("--shape applies to ONNX models; a checkpoint's inputs are made at fixed shapes "
                             "(--inputs gives your own)")
        return hf.load(model, task, seed, inputs)
    if model.startswith("example:"):
        from fpdiff.sources.examples import example_path
        return _torch_spec(example_path(model.removeprefix("example:")), label=model, seed=seed)
    path = Path(model)
    if not path.exists():
        raise UsageError(f"model file not found: {model}")
    if path.is_dir():
        raise UsageError(f"model must be a file (spec .py, .onnx or .pt2), got a directory: {model}"
                         + (" (a Hugging Face checkpoint: hf:DIR)" if (path / "config.json").exists() else ""))
    if path.suffix == ".onnx":
        from fpdiff.sources.onnx_file import load_onnx
        return load_onnx(path, inputs=inputs, shapes=shapes or {}, seed=seed, keep_opset=keep_opset)
    if path.suffix == ".pt2":
        if shapes:
            raise UsageError("--shape applies to ONNX models; an exported program's inputs are saved with it "
                             "(--inputs gives your own)")
        from fpdiff.sources import program
        return program.load(path, seed, inputs)
    if path.suffix == ".py":
        if inputs:
            raise UsageError("--inputs applies to ONNX models, exported programs and hf: checkpoints; a spec file "
                             "defines inputs() itself")
        return _torch_spec(path, label=str(path), seed=seed)
    raise UsageError(f"unknown model kind {path.suffix!r}: give a spec .py, an .onnx, an exported program .pt2, "
                     "hf:DIR or example:NAME")


def _torch_spec(path: Path, label: str, seed: int) -> Source:
    from fpdiff.sources.spec import load_spec
    return load_spec(path, label=label, seed=seed)
