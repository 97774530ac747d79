"""The backend registry: built-ins and users' plugins register the same way (entry points or --plugin)."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from ..errors import UsageError

ENTRY_POINT_GROUP = "fpdiff.backends"
# Set to 1 to load only fpdiff's own entry points: a broken or unwanted third-party backend package stays out of
# every command (as PYTEST_DISABLE_PLUGIN_AUTOLOAD does for pytest). --plugin files still load.
NO_AUTOLOAD = "FPDIFF_DISABLE_PLUGIN_AUTOLOAD"
_reported: set[str] = set()  # skipped entry points already told about in this process
# A cast cell is reported as dtype-changed when fewer than a quarter of its float arithmetic ops ran in the
# requested dtype. Many wide ops are normal in an fp16 model: torch computes norm statistics and softmax sums in
# fp32 and compilers follow (IREE ran 16 of 35 ops of tinycnn's fp16 dispatches in fp16, the rest are group/batch
# norm statistics); below a quarter the cell no longer measures the precision asked for (ORT's CPU provider: 0 of 7).
MOSTLY = 0.25


def too_wide(counts: dict, want: str, planned: dict | None = None) -> bool:
    """The dtype-changed rule on counted float ops (see MOSTLY). `planned`: the same count on the graph the backend
    was handed, when that graph itself mixes dtypes (an autocast graph keeps ops in float32 on purpose): the rule
    then wants a quarter of the share it asked for, not a quarter of all ops."""
    total = sum(counts.values())
    asked = planned.get(want, 0) / sum(planned.values()) if planned and sum(planned.values()) else 1.0
    return bool(total) and counts.get(want, 0) < MOSTLY * asked * total


def mixed_dtype(counts: dict, want: str) -> str | None:
    """What a cell computed in, from counted float ops: the requested dtype with its share when others ran too."""
    total = sum(counts.values())
    if not total:
        return None
    if counts.get(want, 0) == total:
        return want
    others = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if k != want)
    return f"{want} ({counts.get(want, 0)} of {total} float ops; {others})"


@runtime_checkable
class Backend(Protocol):
    """The minimum a plugin provides. `prepare` gets a torch.export.ExportedProgram already cast to whole-model
    precisions and returns a callable from CPU tensors to a sequence of tensors."""
    name: str

    def available(self) -> str | None: ...

    def prepare(self, program, precision: str, device: str) -> Callable[..., Sequence[Any]]: ...


@dataclass
class Prepared:
    """What a built-in backend hands back: the runnable, plus facts it knows about what it really computes."""
    run: Callable[..., Sequence[Any]]
    computed_dtype: str | None = None  # None: read it from the outputs
    notes: list = field(default_factory=list)  # compare.Finding: facts such as a demoted signature
    info: dict = field(default_factory=dict)  # e.g. {"cache": "hit", "fp16_share": 0.4}


def _is_backend_class(obj) -> bool:
    return (inspect.isclass(obj) and isinstance(getattr(obj, "name", None), str)
            and callable(getattr(obj, "available", None))
            and (callable(getattr(obj, "prepare", None)) or callable(getattr(obj, "prepare_task", None))))


class Registry:
    def __init__(self) -> None:
        self._classes: dict[str, type] = {}
        self._origin: dict[str, str] = {}
        self.skipped: dict[str, str] = {}  # entry point name -> why it was left out

    def register(self, cls: type, origin: str) -> None:
        if not _is_backend_class(cls):
            raise UsageError(f"{origin}: {cls!r} is not a backend (needs name, available(), prepare())")
        if cls.name in self._classes and self._origin[cls.name] != origin:
            raise UsageError(f"backend name {cls.name!r} from {origin} is already taken by {self._origin[cls.name]}")
        self._classes[cls.name] = cls
        self._origin[cls.name] = origin

    def load_entry_points(self, autoload: bool = True) -> None:
        """fpdiff's own entry points first, so a third-party one can never take a built-in's name; one that fails to
        load or to register is skipped with its reason (one broken package must not stop every command)."""
        eps = sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda ep: not ep.value.startswith("fpdiff."))
        for ep in eps:
            if not autoload and not ep.value.startswith("fpdiff."):
                continue
            try:
                self.register(ep.load(), f"entry point {ep.value}")
            except Exception as e:
                self.skipped[ep.name] = f"backend entry point {ep.name} = {ep.value} skipped: {e}"

    def load_plugin_file(self, path: str) -> list[str]:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"plugin file not found: {path}")
        name = "fpdiff_plugin_" + p.stem
        spec = importlib.util.spec_from_file_location(name, p)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Exception as e:
            raise UsageError(f"plugin {path} raised {type(e).__name__}: {e}") from e
        found = [obj for obj in vars(mod).values()
                 if _is_backend_class(obj) and getattr(obj, "__module__", None) == name]
        if not found:
            raise UsageError(f"plugin {path} defines no backend class (name, available(), prepare())")
        for cls in found:
            self.register(cls, f"plugin {path}")
        return [c.name for c in found]

    def plugin_file(self, name: str) -> str | None:
        """The file a --plugin backend came from (None for entry points and built-ins)."""
        origin = self._origin.get(name, "")
        return origin.removeprefix("plugin ") if origin.startswith("plugin ") else None

    def names(self) -> list[str]:
        return list(self._classes)

    def create(self, name: str):
        if name not in self._classes:
            if name in self.skipped:
                raise UsageError(self.skipped[name])
            raise UsageError(f"unknown backend {name!r}; known: {', '.join(self._classes)}")
        return self._classes[name]()


def registry(plugins: Sequence[str] = ()) -> Registry:
    """Every backend: entry points (unless FPDIFF_DISABLE_PLUGIN_AUTOLOAD=1) and --plugin files. Skipped entry
    points are told once per process on stderr, one line each."""
    reg = Registry()
    reg.load_entry_points(autoload=os.environ.get(NO_AUTOLOAD, "") in ("", "0"))
    for why in reg.skipped.values():
        if why not in _reported:
            _reported.add(why)
            print(f"fpdiff: {why}", file=sys.stderr)
    for p in plugins:
        reg.load_plugin_file(p)
    return reg


def to_numpy(t):
    """A CPU tensor as numpy; bfloat16 as ml_dtypes.bfloat16, which ONNX Runtime and IREE both accept."""
    import torch
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()
