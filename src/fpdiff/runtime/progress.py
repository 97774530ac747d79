"""Segments done inside one long job, told by the worker that runs it to the process that shows progress.

The parent opens `listening()`: a small file named in the environment its workers inherit; a worker writes it with
core/segments.py's `segment()` and the parent's display reads it with `read()` (both handed on from there)."""
from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from fpdiff.core.segments import ENV, Segment, read, segment
from fpdiff.runtime import rundir

__all__ = ["ENV", "Segment", "clear", "listening", "read", "segment", "worker_env"]


def clear(path: str | Path) -> None:
    """Forget the last job's segments: the next cell starts from none."""
    with contextlib.suppress(OSError):
        Path(path).unlink()


@contextlib.contextmanager
def listening() -> Iterator[Path]:
    """Ask every worker started inside it for its segments: the file they write, named in the environment they
    inherit (removed, and the variable restored, at the end)."""
    outer = os.environ.get(ENV)
    folder = rundir.mkdtemp(prefix="fpdiff-progress-")  # in the run's scratch root: kept and removed with it
    path = folder / "segment.json"
    os.environ[ENV] = str(path)
    try:
        yield path
    finally:
        if outer is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = outer
        shutil.rmtree(folder, ignore_errors=True)


def worker_env() -> dict[str, str]:
    """The variable a worker needs to tell its segments, when a parent listens; else nothing."""
    path = os.environ.get(ENV)
    return {ENV: path} if path else {}
