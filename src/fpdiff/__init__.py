"""fpdiff: does a model compute the same numbers in every precision and on every backend?"""
from .api import Cell, CheckResult, LocateResult, check, examples, locate

__all__ = ["check", "CheckResult", "Cell", "examples", "locate", "LocateResult"]
