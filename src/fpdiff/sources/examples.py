"""Built-in example models, shipped as spec files so they load exactly like a user's."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

from fpdiff.core.errors import UsageError


def _dir() -> Path:
    return Path(str(resources.files("fpdiff") / "examples"))


def names() -> dict[str, str]:
    """Example name -> its one-line description (the spec file's docstring)."""
    out = {}
    for p in sorted(_dir().glob("*.py")):
        if p.name.startswith("_"):
            continue
        first = p.read_text().split('"""')[1].strip().splitlines()[0] if '"""' in p.read_text() else ""
        out[p.stem] = first
    return out


def example_path(name: str) -> Path:
    p = _dir() / f"{name}.py"
    if name.startswith("_") or not p.exists():
        raise UsageError(f"unknown example {name!r}; known: {', '.join(names())}")
    return p
