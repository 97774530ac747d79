"""Where fpdiff keeps what outlives a run, in one place so every stage agrees."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Compiled artifacts and converted models; FPDIFF_CACHE moves it (CI caches, read-only homes)."""
    return Path(os.environ.get("FPDIFF_CACHE") or Path.home() / ".cache" / "fpdiff")
