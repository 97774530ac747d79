"""Where fpdiff keeps what outlives a run, in one place so every stage agrees."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Compiled artifacts and converted models; FPDIFF_CACHE moves it (CI caches, read-only homes)."""
    return Path(os.environ.get("FPDIFF_CACHE") or Path.home() / ".cache" / "fpdiff")


def write_whole(path: Path, text: str) -> None:
    """A file that other runs may read at any moment (a cache entry's record): written beside, renamed into place, so
    a reader sees all of it or none."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
