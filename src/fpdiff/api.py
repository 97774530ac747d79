"""The Python API; the CLI and the pytest plugin are thin layers over it."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fpdiff.analysis import check as _check
from fpdiff.analysis import fuzz as _fuzz
from fpdiff.analysis import locate as _locate
from fpdiff.analysis import ops as _ops
from fpdiff.analysis import plan as _plan
from fpdiff.analysis import ranges as _ranges
from fpdiff.analysis.check import Cell, CheckResult
from fpdiff.analysis.fuzz import FuzzResult
from fpdiff.analysis.locate import LocateResult
from fpdiff.analysis.ops import OpsResult
from fpdiff.analysis.plan import Plan
from fpdiff.analysis.plan.torch_models import apply_plan
from fpdiff.analysis.ranges import RangesResult
from fpdiff.backends.routes import Routes, using
from fpdiff.sources.examples import names as examples
from fpdiff.testing import assert_agrees

F = TypeVar("F", bound=Callable)


def _routed(run: F) -> F:
    """An analysis that also takes `routes=` (a Routes: backends in another interpreter or on a worker host), in
    force for that run only, on top of fpdiff.toml; without it, fpdiff.toml's routes alone."""
    @functools.wraps(run)
    def routed(*args, routes: Routes | None = None, **kwargs):
        with using(routes):
            return run(*args, **kwargs)
    sig = inspect.signature(run)
    routes_param = inspect.Parameter("routes", inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation="Routes | None")
    routed.__signature__ = sig.replace(parameters=[*sig.parameters.values(), routes_param])  # type: ignore[attr-defined]
    return routed  # type: ignore[return-value]


check = _routed(_check.check)
locate = _routed(_locate.locate)
ranges = _routed(_ranges.ranges)
plan = _routed(_plan.plan)
ops = _routed(_ops.ops)
fuzz = _routed(_fuzz.fuzz)

__all__ = ["assert_agrees", "check", "CheckResult", "Cell", "examples", "locate", "LocateResult", "ranges",
           "RangesResult", "plan", "Plan", "apply_plan", "ops", "OpsResult", "fuzz", "FuzzResult", "rejudge", "Routes"]


def rejudge(report: str | Path | dict) -> CheckResult:
    """A check's JSON report (its path, or the report as a dict) judged again by this fpdiff's rules from the
    evidence it kept, without running a backend; `.rejudged` says which cells changed and which rules it could not
    re-apply."""
    from fpdiff.analysis.check import stored
    from fpdiff.report.json_report import load
    return stored.rejudge(report if isinstance(report, dict) else load(report))
