"""fpdiff: does a model compute the same numbers in every precision and on every backend?

The API's names load on first use, so `import fpdiff` (the pytest plugin, `fpdiff --version`) costs no torch import."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names for type checkers; at run time they load on first use (__getattr__)
    from fpdiff import examples  # noqa: F401  (the example models' package; examples.names() lists them)
    from fpdiff.api import (  # noqa: F401
        Cell,
        CheckResult,
        FpdiffError,
        FuzzResult,
        LocateResult,
        OpsResult,
        Plan,
        RangesResult,
        Routes,
        RunOptions,
        UsageError,
        apply_plan,
        assert_agrees,
        check,
        fuzz,
        locate,
        ops,
        plan,
        ranges,
        rejudge,
    )


def __getattr__(name: str) -> Any:
    if name == "__all__":  # the API's names: its own and each registered analysis's (entry points, read once)
        return _api().names()
    if name == "__version__":
        from fpdiff.core.versions import fpdiff_version
        globals()[name] = value = fpdiff_version()
        return value
    if name.startswith("__"):  # a probe of a module attribute (inspect, pickle, doctest) loads nothing
        raise AttributeError(f"module 'fpdiff' has no attribute {name!r}")
    api = _api()
    if name in api.names():
        value = getattr(api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fpdiff' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_api().names(), "__version__"])


def _api() -> Any:
    """fpdiff.api, imported by name (`from fpdiff import api` here would ask this module's __getattr__ for it)."""
    import importlib
    return importlib.import_module("fpdiff.api")
