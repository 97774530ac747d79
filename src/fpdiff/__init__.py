"""fpdiff: does a model compute the same numbers in every precision and on every backend?"""
from .api import Cell, CheckResult, LocateResult, RangesResult, check, examples, locate, ranges

__all__ = ["check", "CheckResult", "Cell", "examples", "locate", "LocateResult", "ranges", "RangesResult"]
