"""fpdiff: does a model compute the same numbers in every precision and on every backend?"""
from .api import Cell, CheckResult, check, examples

__all__ = ["check", "CheckResult", "Cell", "examples"]
