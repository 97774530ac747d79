"""Entry points, read the one way every registry of fpdiff reads them (backends, analyses): fpdiff's own first, so a
third-party one can never take a built-in's name; with autoload off, fpdiff's own only; one that fails to load or to
register is skipped with its reason (one broken package must not stop every command)."""
from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from fpdiff.core.errors import UsageError


class Declared(Protocol):
    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Declared)

# Set to 1 to load only fpdiff's own entry points: a broken or unwanted third-party package stays out of every command
# (as PYTEST_DISABLE_PLUGIN_AUTOLOAD does for pytest). --plugin files still load.
NO_AUTOLOAD = "FPDIFF_DISABLE_PLUGIN_AUTOLOAD"


def autoload() -> bool:
    return os.environ.get(NO_AUTOLOAD, "") in ("", "0")


def load(group: str, register: Callable[[Any, str], None], what: str, autoload: bool = True) -> dict[str, str]:
    """Each entry point of `group` loaded and given to register(obj, origin); returns those skipped, by name, with
    the line that says why."""
    skipped: dict[str, str] = {}
    eps = sorted(importlib.metadata.entry_points(group=group), key=lambda ep: not ep.value.startswith("fpdiff."))
    for ep in eps:
        if not autoload and not ep.value.startswith("fpdiff."):
            continue
        try:
            register(ep.load(), f"entry point {ep.value}")
        except Exception as e:
            skipped[ep.name] = f"{what} entry point {ep.name} = {ep.value} skipped: {e}"
    return skipped


class Named(Generic[T]):
    """Declarations by name, each with where it came from (an entry point, a notebook): one that fails `check` is
    refused in one line, and a name taken from elsewhere cannot be taken again. `taken` and `unknown` are the lines
    said then, formatted with name, origin, by and known."""

    def __init__(self, check: Callable[[T], None], taken: str, unknown: str) -> None:
        self._by_name: dict[str, T] = {}
        self._origin: dict[str, str] = {}
        self.skipped: dict[str, str] = {}
        self._check, self._taken, self._unknown = check, taken, unknown

    def register(self, d: T, origin: str = "the caller") -> None:
        self._check(d)
        name = d.name
        if name in self._by_name and self._origin[name] != origin:
            raise UsageError(self._taken.format(name=name, origin=origin, by=self._origin[name]))
        self._by_name[name] = d
        self._origin[name] = origin

    def get(self, name: str) -> T:
        if name not in self._by_name:
            raise UsageError(self.skipped.get(name) or self._unknown.format(name=name, known=", ".join(self.names())))
        return self._by_name[name]

    def names(self) -> list[str]:
        return list(self._by_name)

    def all(self) -> list[T]:
        return list(self._by_name.values())
