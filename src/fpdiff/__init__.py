"""fpdiff: does a model compute the same numbers in every precision and on every backend?

The API's names load on first use, so `import fpdiff` (the pytest plugin, `fpdiff --version`) costs no torch import."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fpdiff.api import (
        Cell,
        CheckResult,
        FuzzResult,
        LocateResult,
        OpsResult,
        Plan,
        RangesResult,
        Routes,
        apply_plan,
        assert_agrees,
        check,
        examples,
        fuzz,
        locate,
        ops,
        plan,
        ranges,
        rejudge,
    )

__all__ = ["assert_agrees", "check", "CheckResult", "Cell", "examples", "locate", "LocateResult", "ranges",
           "RangesResult", "plan", "Plan", "apply_plan", "ops", "OpsResult", "fuzz", "FuzzResult", "rejudge", "Routes"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from fpdiff.core.versions import fpdiff_version
        globals()[name] = value = fpdiff_version()
        return value
    if name in __all__:
        from fpdiff import api
        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fpdiff' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__, "__version__"])
