"""The Python API; the CLI and the pytest plugin are thin layers over it."""
from __future__ import annotations

from fpdiff.check import Cell, CheckResult, check
from fpdiff.locate import LocateResult, locate
from fpdiff.plan import Plan, plan
from fpdiff.plan.torch_models import apply_plan
from fpdiff.ranges import RangesResult, ranges
from fpdiff.sources.examples import names as examples

__all__ = ["check", "CheckResult", "Cell", "examples", "locate", "LocateResult", "ranges", "RangesResult",
           "plan", "Plan", "apply_plan"]
