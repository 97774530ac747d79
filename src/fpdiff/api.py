"""The Python API; the CLI and the pytest plugin are thin layers over it."""
from __future__ import annotations

from .check import Cell, CheckResult, check
from .locate import LocateResult, locate
from .plan import Plan, plan
from .plan_torch import apply_plan
from .ranges import RangesResult, ranges
from .sources.examples import names as examples

__all__ = ["check", "CheckResult", "Cell", "examples", "locate", "LocateResult", "ranges", "RangesResult",
           "plan", "Plan", "apply_plan"]
