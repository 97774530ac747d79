"""fpdiff: does a model compute the same numbers in every precision and on every backend?"""
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
