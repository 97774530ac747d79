"""Segments done inside one long job: how a worker tells them and how they are read back. Here, at the bottom, so
that a backend running a long model (its block list) tells them without knowing the runtime that listens
(runtime/progress.py opens the file and names it in the environment a worker inherits).

A worker calls `segment(done, total, what)` as it finishes each part of a long job (a model block of the streamed
float64 judge); the call overwrites that file atomically, at most a few times a second, and the parent's display
reads it with `read()`. Without the environment variable `segment()` returns at once: a job nobody watches pays one
dict lookup."""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

# Workers (local children, --backend-python interpreters) inherit it; a remote worker has no such file and stays silent.
ENV = "FPDIFF_PROGRESS"
# A person reads a progress line a few times a second; a model of hundreds of small blocks must not pay a file
# write per block, so writes closer together than this are skipped (the last segment of a job is always written).
MIN_INTERVAL = 0.1

_last_write = 0.0


@dataclass(frozen=True)
class Segment:
    """Where a worker stands inside its current job."""
    done: int
    total: int
    what: str = ""

    def text(self) -> str:
        return f"segment {self.done}/{self.total}" + (f" ({self.what})" if self.what else "")


def watched() -> bool:
    """Whether a parent listens for this job's segments (a backend hooks nothing when none does)."""
    return bool(os.environ.get(ENV))


def segment(done: int, total: int, what: str = "") -> None:
    """Tell the watching parent that `done` of `total` segments of this job are done; a no-op when none watches."""
    path = os.environ.get(ENV)
    if not path:
        return
    global _last_write
    now = time.monotonic()
    if now - _last_write < MIN_INTERVAL and done < total:
        return
    _last_write = now
    _write(Path(path), {"done": int(done), "total": int(total), "what": str(what)})


def _write(path: Path, data: dict) -> None:
    """Replace the file whole, so the reader never sees half a line; a parent gone away costs the job nothing."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def read(path: str | Path) -> Segment | None:
    """The last segment a worker told, or None when none has (or the file is gone between two cells)."""
    try:
        data = json.loads(Path(path).read_text())
        return Segment(int(data["done"]), int(data["total"]), str(data.get("what", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
