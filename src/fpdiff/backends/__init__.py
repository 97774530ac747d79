"""The backend registry: built-ins and users' plugins register the same way (entry points or --plugin)."""
from __future__ import annotations

import functools
import importlib.util
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fpdiff.backends import routes
from fpdiff.backends.base import PROGRAM, Backend, PluginAdapter, Prepared, RoutedBackend, Task, adapt, routed
from fpdiff.core import plugins as entry_points
from fpdiff.core.errors import UsageError
from fpdiff.core.plugins import NO_AUTOLOAD

__all__ = ["NO_AUTOLOAD", "PROGRAM", "Backend", "Prepared", "Registry", "Task", "cross_check_for", "judge_flags",
           "judge_for", "registry", "to_numpy"]

ENTRY_POINT_GROUP = "fpdiff.backends"
_reported: set[str] = set()  # skipped entry points already told about in this process
# Declarations that name model kinds a backend serves alone: one judge and one cross-check per kind.
_ONE_PER_KIND = ("judges", "cross_checks")


def _is_backend_class(obj: object) -> bool:
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
        """Add a class in either form; its declarations are checked here (an unknown one is a UsageError)."""
        if not _is_backend_class(cls):
            raise UsageError(f"{origin}: {cls!r} is not a backend (needs name, available(), prepare())")
        name: str = cls.name  # type: ignore[attr-defined]  # _is_backend_class: a str name
        if name in self._classes and self._origin[name] != origin:
            raise UsageError(f"backend name {name!r} from {origin} is already taken by {self._origin[name]}")
        try:
            backend = adapt(cls)
        except UsageError as e:
            raise UsageError(f"{origin}: {e}") from None
        for decl in _ONE_PER_KIND:
            for kind in getattr(backend, decl):
                other = self._declaring(decl, kind)
                if other not in (None, name):
                    raise UsageError(f"{origin}: backend {name!r} declares {decl} {kind!r}, which {other!r} "
                                     f"({self._origin[other]}) declares already")
        self._classes[name] = backend
        self._origin[name] = origin

    def load_entry_points(self, autoload: bool = True) -> None:
        """The backends' entry points (core.plugins: fpdiff's own first; a broken one skipped with its reason)."""
        self.skipped.update(entry_points.load(ENTRY_POINT_GROUP, self.register, "backend", autoload))

    def load_plugin_file(self, path: str) -> list[str]:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"plugin file not found: {path}")
        name = "fpdiff_plugin_" + p.stem
        spec = importlib.util.spec_from_file_location(name, p)
        if spec is None or spec.loader is None:
            raise UsageError(f"plugin {path} is not a Python file that can be imported")
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

    def add_route(self, route: routes.Route) -> None:
        """A backend run elsewhere; it may shadow a local one of the same name (run `ort` in another env)."""
        self._classes[route.name] = routed(route, self._classes.get(route.base))
        self._origin[route.name] = f"routed to {route.where}"

    def plugin_file(self, name: str) -> str | None:
        """The file a --plugin backend came from (None for entry points and built-ins)."""
        origin = self._origin.get(name, "")
        return origin.removeprefix("plugin ") if origin.startswith("plugin ") else None

    def names(self) -> list[str]:
        return list(self._classes)

    def _declaring(self, decl: str, kind: str) -> str | None:
        """The backend whose `decl` (judges, cross_checks) names this model kind."""
        return next((n for n, c in self._classes.items() if kind in getattr(c, decl)), None)

    def judge_for(self, kind: str) -> str:
        """The float64 judge and per-precision baseline of `kind` models: the backend whose `judges` names it."""
        found = self._declaring("judges", kind)
        if found is None:
            raise UsageError(f"no backend judges {kind} models (none declares judges = {{{kind!r}}})")
        return found

    def cross_check_for(self, kind: str) -> str | None:
        """The judge's independent fp32 cross-check on `kind` models, when a backend declares it (cross_checks)."""
        return self._declaring("cross_checks", kind)

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


def judge_for(kind: str) -> str:
    """The built-in judge of a model kind (torch eager for torch models, the ONNX reference evaluator for ONNX)."""
    return _entry_points().judge_for(kind)


def cross_check_for(kind: str) -> str | None:
    """The built-in independent cross-check of the judge on a model kind (ONNX Runtime for ONNX), if any."""
    return _entry_points().cross_check_for(kind)


def judge_flags(kind_judge: str) -> tuple[str, ...]:
    """The flags that make a judge backend's fp64 job the float64 judge (base.py judge_flags), from the registered
    backends (a judge is never a --plugin file's or a route's)."""
    return tuple(getattr(_entry_points().cls(kind_judge), "judge_flags", ()))


@functools.cache
def _entry_points() -> Registry:
    """The registered backends without plugins or routes: who judges a kind never depends on a --plugin file, and a
    route runs a backend elsewhere under its name without changing what it is."""
    reg = Registry()
    reg.load_entry_points(autoload=entry_points.autoload())
    return reg


def registry(plugins: Sequence[str] = (), routed: bool = True) -> Registry:
    """Every backend: entry points (unless FPDIFF_DISABLE_PLUGIN_AUTOLOAD=1), --plugin files and, unless `routed` is
    False (a worker runs what it is sent), the routes in force. Skipped entry points are told once per process on
    stderr, one line each."""
    reg = Registry()
    reg.load_entry_points(autoload=entry_points.autoload())
    for why in reg.skipped.values():
        if why not in _reported:
            _reported.add(why)
            print(f"fpdiff: {why}", file=sys.stderr)
    for p in plugins:
        reg.load_plugin_file(p)
    for route in routes.active().values() if routed else ():
        reg.add_route(route)
    return reg


def to_numpy(t: Any) -> Any:
    """A CPU tensor as numpy; bfloat16 as ml_dtypes.bfloat16 (IREE takes it; ORT through its own values, ort.py)."""
    import torch
    if t.dtype == torch.bfloat16:
        import ml_dtypes
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()
