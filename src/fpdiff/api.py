"""The Python API; the CLI and the pytest plugin are thin layers over it."""
from __future__ import annotations

from pathlib import Path

from fpdiff.analysis.check import Cell, CheckResult, check
from fpdiff.analysis.fuzz import FuzzResult, fuzz
from fpdiff.analysis.locate import LocateResult, locate
from fpdiff.analysis.ops import OpsResult, ops
from fpdiff.analysis.plan import Plan, plan
from fpdiff.analysis.plan.torch_models import apply_plan
from fpdiff.analysis.ranges import RangesResult, ranges
from fpdiff.sources.examples import names as examples
from fpdiff.testing import assert_agrees

__all__ = ["assert_agrees", "check", "CheckResult", "Cell", "examples", "locate", "LocateResult", "ranges",
           "RangesResult", "plan", "Plan", "apply_plan", "ops", "OpsResult", "fuzz", "FuzzResult", "rejudge"]


def rejudge(report: str | Path | dict) -> CheckResult:
    """A check's JSON report (its path, or the report as a dict) judged again by this fpdiff's rules from the
    evidence it kept, without running a backend; `.rejudged` says which cells changed and which rules it could not
    re-apply."""
    from fpdiff.analysis.check import stored
    from fpdiff.report.json_report import load
    return stored.rejudge(report if isinstance(report, dict) else load(report))
