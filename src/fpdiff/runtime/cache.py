"""Compiled artifacts on disk, keyed by a content hash of everything that can change them."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fpdiff.runtime import rundir
from fpdiff.sources.base import digest


class Cache:
    def __init__(self, root: Path | str | None) -> None:
        self.root = Path(root) if root else None  # None: caching off, artifacts go to a temp dir

    def path(self, *key: str, suffix: str) -> Path:
        base = self.root if self.root else rundir.mkdtemp(prefix="fpdiff-nocache-")
        base.mkdir(parents=True, exist_ok=True)
        return base / f"{digest(*key)}{suffix}"

    def get_or_build(self, *key: str, suffix: str, build: Callable[[Path], None]) -> tuple[Path, bool]:
        """Return (path, hit). `build` writes to a temp path that is renamed into place only when it succeeds."""
        final = self.path(*key, suffix=suffix)
        if self.root and final.exists():
            return final, True
        tmp = final.with_name(final.name + f".tmp{os.getpid()}")
        try:
            build(tmp)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                tmp.unlink()
        return final, False
