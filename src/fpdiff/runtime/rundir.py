"""One scratch directory per run, so nothing temporary outlives it (kept with --keep-temp, for debugging)."""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

# Child processes (workers, segment runs) inherit the run's directory through the environment.
ENV = "FPDIFF_RUN_DIR"
P = ParamSpec("P")
R = TypeVar("R")


@contextlib.contextmanager
def run_directory(keep: bool = False) -> Iterator[Path]:
    """The run's scratch root, removed at the end unless `keep`. Nested runs (plan checking its plan) share the
    outer run's directory, which the outer run removes."""
    outer = os.environ.get(ENV)
    if outer and Path(outer).is_dir():
        yield Path(outer)
        return
    path = Path(tempfile.mkdtemp(prefix="fpdiff-run-"))
    os.environ[ENV] = str(path)
    try:
        yield path
    finally:
        os.environ.pop(ENV, None)
        if keep:
            print(f"fpdiff: temporary files kept in {path}", file=sys.stderr)
        else:
            shutil.rmtree(path, ignore_errors=True)


def mkdtemp(prefix: str) -> Path:
    """A fresh directory inside the run's scratch root (the system temp dir outside a run)."""
    base = os.environ.get(ENV)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base if base and Path(base).is_dir() else None))


def scoped(fn: Callable[P, R]) -> Callable[P, R]:
    """An analysis entry point (check, locate, plan, ranges) that cleans up after itself when called alone."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with run_directory():
            return fn(*args, **kwargs)
    return wrapper
