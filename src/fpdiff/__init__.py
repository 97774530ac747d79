"""fpdiff: does a model compute the same numbers in every precision and on every backend?

The API's names load on first use, so `import fpdiff` (the pytest plugin, `fpdiff --version`) costs no torch import."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fpdiff.api import (
        Cell,
        CheckResult,
        LocateResult,
        Plan,
        RangesResult,
        apply_plan,
        assert_agrees,
        check,
        examples,
        locate,
        plan,
        ranges,
    )

__all__ = ["assert_agrees", "check", "CheckResult", "Cell", "examples", "locate", "LocateResult", "ranges",
           "RangesResult", "plan", "Plan", "apply_plan"]


def _version() -> str:
    """The installed distribution's version; in a source tree never installed, the one pyproject.toml declares."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("fpdiff")
    except PackageNotFoundError:
        import re
        from pathlib import Path
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M) if pyproject.is_file() else None
        return found.group(1) if found else "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name in __all__:
        from fpdiff import api
        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fpdiff' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__, "__version__"])
