"""Built-in example models, shipped as spec files so they load exactly like a user's."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from fpdiff.core.errors import UsageError
from fpdiff.examples import names

__all__ = ["example_path", "names"]


def _dir() -> Path:
    return Path(str(resources.files("fpdiff") / "examples"))


def example_path(name: str) -> Path:
    p = _dir() / f"{name}.py"
    if name.startswith("_") or not p.exists():
        raise UsageError(f"unknown example {name!r}; known: {', '.join(names())}")
    return p
