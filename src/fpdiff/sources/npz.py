"""Inputs the user gives as an .npz file (one array per input, by name)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fpdiff.core.errors import UsageError


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the file by name; a missing or unreadable file is one line."""
    if not path.exists():
        raise UsageError(f"inputs file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:
        raise UsageError(f"cannot read inputs file {path}: {e}") from e
