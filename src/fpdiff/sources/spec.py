"""Spec files: a Python file with model() and inputs(), optional dynamic_shapes() and tolerance."""
from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import torch

from fpdiff.core.errors import UsageError
from fpdiff.model import weights
from fpdiff.sources.base import Source, SourceRef, digest

# Loggers of libraries a model's code imports on the way (transformers probing torchao): torchao says which of its
# optional kernels its wheel lacks ("Failed to load ... _C_mxfp8", "_C_cutlass_90a") and torch's pytree that torchao
# registers enums the old way, on every run and in every worker; nothing fpdiff runs uses them, so they are held to
# errors while a model's code is imported and built
PROBED = ("torchao", "torch.utils._pytree")


@contextlib.contextmanager
def held(names: tuple[str, ...], level: int) -> Iterator[None]:
    """Loggers held to `level` for the block, then given their own levels back."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, was in zip(loggers, levels):
            lg.setLevel(was)


def quiet_imports() -> contextlib.AbstractContextManager[None]:
    """The probed libraries' warnings held back (their errors still show)."""
    return held(PROBED, logging.ERROR)


def module_name(path: Path) -> str:
    """The name a spec file is imported under: one per file name and content, wherever the file or a copy of it is
    read from, so the names a conversion writes (a .tflite's tensor names carry the module's) are the same in every
    run and every cache."""
    return f"fpdiff_spec_{digest(path.name, path.read_bytes())}"


def import_spec(path: Path):
    """Import a spec file as a fresh module; any error in it is the user's and is said in one line."""
    name = module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import spec file {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        with quiet_imports():
            spec.loader.exec_module(mod)
    except Exception as e:  # the user's code: report, do not crash
        raise UsageError(f"spec {path} raised {type(e).__name__}: {e}") from e
    return mod


def build_model(mod, path: Path, seed: int) -> torch.nn.Module:
    """Call model() under a fixed seed, so every process builds the same weights."""
    for fn in ("model", "inputs"):
        if not callable(getattr(mod, fn, None)):
            raise UsageError(f"spec {path} does not define {fn}()")
    torch.manual_seed(seed)
    with quiet_imports():  # a model class imported lazily (transformers) imports its libraries here
        model = _call(mod.model, "model", path)
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"spec {path}: model() must return a torch.nn.Module, got {type(model).__name__}")
    return model.eval()


def build(mod, path: Path, seed: int) -> tuple[torch.nn.Module, tuple]:
    """Call model() and inputs() under a fixed seed, so every process builds the same weights and inputs."""
    model = build_model(mod, path, seed)
    torch.manual_seed(seed + 1)
    inputs = _call(mod.inputs, "inputs", path)
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    if not isinstance(inputs, tuple) or not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise UsageError(f"spec {path}: inputs() must return a non-empty tuple of tensors")
    return model, tuple(t.detach().cpu() for t in inputs)


def _call(fn, name: str, path: Path):
    try:
        return fn()
    except Exception as e:
        raise UsageError(f"spec {path}: {name}() raised {type(e).__name__}: {e}") from e


def load_spec(path: Path, label: str, seed: int) -> Source:
    mod = import_spec(path)
    _refuse_unfit(mod, path, seed)
    model, inputs = build(mod, path, seed)
    dyn = None
    if callable(getattr(mod, "dynamic_shapes", None)):
        dyn = _call(mod.dynamic_shapes, "dynamic_shapes", path)
    tol = getattr(mod, "tolerance", None) or {}
    if not isinstance(tol, dict) or not all(isinstance(v, (int, float)) and v > 0 for v in tol.values()):
        raise UsageError(f"spec {path}: tolerance must be a dict of precision name -> positive number")
    names = _input_names(model, len(inputs))
    fp = weights.fingerprint(model, path.read_bytes())
    return Source(SourceRef("torch", str(path.resolve()), label), inputs, names, dyn, dict(tol), model, fp)


def _refuse_unfit(mod, path: Path, seed: int) -> None:
    """A model too big for this machine is refused before it is built: sized on the meta device (no memory)."""
    try:
        with torch.device("meta"):
            skeleton = build_model(mod, path, seed)
    except Exception:  # noqa: BLE001 - a model that cannot be built on meta is sized by its real build
        return
    weights.refuse_unfit(skeleton, f"the model of {path.name}")


def _input_names(model: torch.nn.Module, n: int) -> list[str]:
    import inspect
    try:
        params = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return params[:n] if len(params) >= n else [f"input{i}" for i in range(n)]
