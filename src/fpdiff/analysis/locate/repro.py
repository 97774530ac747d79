"""locate's repro bundle for one segment: the shared bundle (analysis/repro.py) under the relative-L2 rule, with
torch eager's error at the same precision as the baseline."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fpdiff.analysis import repro
from fpdiff.core.precision import Precision


def write(out: Path, *, title: str, backend, precision: Precision, device: str, program, inputs: list,
          expected: list[np.ndarray], backend_out: list[np.ndarray] | None, baseline_rel_l2: float, limit: float,
          flags: tuple[str, ...], versions: dict) -> Path:
    """Write the segment's bundle; the script exits 1 when the backend's relative L2 vs float64 exceeds `limit`.
    Returns the script's path."""
    return repro.write(out, title=title, tool="locate", backend=backend, precision=precision.name, device=device,
                       program=program, inputs=list(inputs), expected=expected, observed=backend_out,
                       rule=repro.REL_L2, limit=limit, baseline={"rel_l2": float(baseline_rel_l2)},
                       baseline_label="torch eager", flags=flags, versions=versions,
                       refusal_hint="; rerun with --no-repro")
