"""A model the user holds in Python (an nn.Module and its example inputs) as a spec file the workers load: the module
pickled, its defining file's root on sys.path so its class imports there too. Code a fresh process cannot import (a
class defined in a notebook cell, a script or `python -c`, that is in `__main__`, or in a module loaded from a file
under a name no path finds) travels by value (cloudpickle), as Ray and multiprocessing-based tools carry it. Written
once per module and inputs under a folder that outlives the run, so the commands a result suggests run as printed."""
from __future__ import annotations

import hashlib
import inspect
import io
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from fpdiff.core.errors import UsageError
from fpdiff.sources.base import importable

MODULES_DIR = "fpdiff-out/modules"  # beside the repro bundles: what a run writes for the user to run again

_SPEC = '''"""Written by fpdiff for an in-memory {name}; its class imports from where it was defined."""
import sys
from pathlib import Path

import torch

sys.path[:0] = {paths!r}
HERE = Path(__file__).parent


def model():
    return torch.load(HERE / "module.pt", weights_only=False)


def inputs():
    return tuple(torch.load(HERE / "inputs.pt"))
'''


def example_inputs(inputs: object, who: str) -> tuple:
    """A tensor or a sequence of tensors as the model's example inputs; anything else is one line."""
    found = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs) if isinstance(inputs, Sequence) else None
    if not found or not all(isinstance(t, torch.Tensor) for t in found):
        raise UsageError(f"{who} needs the module's example inputs: inputs=(tensor, ...), not {type(inputs).__name__}")
    return tuple(t.detach().cpu() for t in found)


def module_spec(model: torch.nn.Module, inputs: tuple, folder: str | Path | None = None, who: str = "fpdiff") -> str:
    """The spec file of an in-memory module and its inputs, in `folder` (default: MODULES_DIR/CLASS-DIGEST, the same
    folder for the same module and inputs)."""
    cls = type(model)
    buf = io.BytesIO()
    by_value = _by_value(model)
    try:
        _save(model, buf, by_value)
    except Exception as e:
        raise UsageError(f"{who} cannot hand {cls.__name__} to its workers ({type(e).__name__}: {_first(e)}); write a "
                         "spec file (model(), inputs()) or save a torch.export program (.pt2) and pass its path"
                         ) from None
    data = io.BytesIO()
    torch.save(tuple(inputs), data)
    digest = hashlib.sha256(buf.getvalue() + data.getvalue()).hexdigest()[:12]
    out = Path(folder) if folder is not None else Path(MODULES_DIR) / f"{cls.__name__}-{digest}"
    text = _SPEC.format(name=cls.__name__, paths=_class_roots(cls))
    return write_spec(out, text, {"module.pt": buf.getvalue(), "inputs.pt": data.getvalue()})


def _by_value(model: torch.nn.Module) -> list[str]:
    """The modules defining the model's classes that a worker cannot import by name (sources.base.importable)."""
    return sorted(n for n in {type(m).__module__ for m in model.modules()} if not importable(n))


def _save(model: torch.nn.Module, buf: io.BytesIO, by_value: list[str]) -> None:
    """torch.save, with the classes of `by_value`'s modules pickled by value (their code travels with the module);
    a module plain pickle refuses (a lambda, a closure) goes by value whole."""
    if not by_value:
        try:
            torch.save(model, buf)
            return
        except (pickle.PicklingError, AttributeError, TypeError):
            buf.seek(0)
            buf.truncate()
    import cloudpickle
    registered = [sys.modules[n] for n in by_value if n != "__main__" and n in sys.modules]  # __main__: by itself
    for mod in registered:
        cloudpickle.register_pickle_by_value(mod)
    try:
        torch.save(model, buf, pickle_module=cloudpickle)
    finally:
        for mod in registered:
            cloudpickle.unregister_pickle_by_value(mod)


def _first(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


def write_spec(out: Path, text: str, files: dict[str, bytes]) -> str:
    """A written spec: its text as `out`/spec.py beside `files` (name -> bytes); a folder that cannot be written is
    one line."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (out / name).write_bytes(data)
        spec = out / "spec.py"
        spec.write_text(text)
    except OSError as e:
        raise UsageError(f"cannot write the model's spec under {out}: {e.strerror or e}") from None
    return str(spec)


def _class_roots(cls: type) -> list[str]:
    """The folder the module's class imports from (its file's package root), when it has a file."""
    try:
        file = Path(inspect.getfile(cls)).resolve()
        return [str(file.parents[cls.__module__.count(".")])]
    except (TypeError, OSError, IndexError):
        return []
