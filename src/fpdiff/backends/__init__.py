"""The backend registry: built-ins and users' plugins register the same way (entry points or --plugin)."""
from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from fpdiff.backends import routes
from fpdiff.backends.base import Backend, PluginAdapter, Prepared, RoutedBackend, adapt, routed
from fpdiff.core.errors import UsageError

__all__ = ["Backend", "Prepared", "Registry", "mixed_dtype", "registry", "to_numpy", "too_wide"]

ENTRY_POINT_GROUP = "fpdiff.backends"
# Set to 1 to load only fpdiff's own entry points: a broken or unwanted third-party backend package stays out of
# every command (as PYTEST_DISABLE_PLUGIN_AUTOLOAD does for pytest). --plugin files still load.
NO_AUTOLOAD = "FPDIFF_DISABLE_PLUGIN_AUTOLOAD"
_reported: set[str] = set()  # skipped entry points already told about in this process
# The float64 judge and per-precision baseline of each model kind: torch eager for torch models (the reference
# implementation), the ONNX reference evaluator for ONNX models (checked against ONNX Runtime every run:
# check/judge.py).
JUDGE = {"torch": "torch", "onnx": "onnxref"}
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
    if len([n for n in counts.values() if n]) == 1:  # all of it in one other dtype: that is what it computed in
        return next(k for k, n in counts.items() if n)
    others = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()) if k != want)
    return f"{want} ({counts.get(want, 0)} of {total} float ops; {others})"


def _is_backend_class(obj) -> bool:
    """A Backend subclass, or the minimal plugin form (name, available(), prepare())."""
    if not inspect.isclass(obj) or not isinstance(getattr(obj, "name", None), str):
        return False
    if issubclass(obj, Backend):
        return obj not in (Backend, PluginAdapter, RoutedBackend) and "prepare_task" in _defined(obj)
    return callable(getattr(obj, "available", None)) and callable(getattr(obj, "prepare", None))


def _defined(cls: type) -> set[str]:
    """Names a class defines below Backend (so Backend itself and the adapter do not count as backends)."""
    return {k for c in cls.__mro__ if c not in (Backend, PluginAdapter, RoutedBackend, object) for k in vars(c)}


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
        self._classes[cls.name] = adapt(cls)
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

    def add_route(self, route) -> None:
        """A backend run elsewhere; it may shadow a local one of the same name (run `ort` in another env)."""
        self._classes[route.name] = routed(route, self._classes.get(route.base))
        self._origin[route.name] = f"routed to {route.where}"

    def plugin_file(self, name: str) -> str | None:
        """The file a --plugin backend came from (None for entry points and built-ins)."""
        origin = self._origin.get(name, "")
        return origin.removeprefix("plugin ") if origin.startswith("plugin ") else None

    def names(self) -> list[str]:
        return list(self._classes)

    def cls(self, name: str) -> type[Backend]:
        """The backend's class: its declarations (kinds, shape_variants, takes_flags...) without making one."""
        if name not in self._classes:
            if name in self.skipped:
                raise UsageError(self.skipped[name])
            raise UsageError(f"unknown backend {name!r}; known: {', '.join(self._classes)}")
        return self._classes[name]

    def create(self, name: str) -> Backend:
        backend = self.cls(name)()
        backend.origin = self._origin[name]
        return backend


def registry(plugins: Sequence[str] = (), routed: bool = True) -> Registry:
    """Every backend: entry points (unless FPDIFF_DISABLE_PLUGIN_AUTOLOAD=1), --plugin files and, unless `routed` is
    False (a worker runs what it is sent), the routes in force. Skipped entry points are told once per process on
    stderr, one line each."""
    reg = Registry()
    reg.load_entry_points(autoload=os.environ.get(NO_AUTOLOAD, "") in ("", "0"))
    for why in reg.skipped.values():
        if why not in _reported:
            _reported.add(why)
            print(f"fpdiff: {why}", file=sys.stderr)
    for p in plugins:
        reg.load_plugin_file(p)
    for route in routes.active().values() if routed else ():
        reg.add_route(route)
    return reg


def to_numpy(t):
    """A CPU tensor as numpy; bfloat16 as ml_dtypes.bfloat16, which ONNX Runtime and IREE both accept."""
    import torch
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()
