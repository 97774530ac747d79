"""The built-in example models (`example:NAME`), one spec file each; `names()` lists them with their first lines.

A package, so `fpdiff.examples` is one thing whether or not a model module was imported from it first."""
from fpdiff.sources.examples import names

__all__ = ["names"]
