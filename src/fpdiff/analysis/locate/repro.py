"""locate's repro bundle for one segment: the shared bundle (analysis/repro.py) under the relative-L2 rule, with
torch eager's error at the same precision as the baseline."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.analysis import repro
from fpdiff.core.precision import Precision


@dataclass(frozen=True)
class Where:
    """Where a segment's bundle runs: the backend (an instance), the precision and device, its flags, the versions."""
    backend: Any
    precision: Precision
    device: str
    flags: tuple[str, ...]
    versions: dict


def write(out: Path, where: Where, title: str, segment: tuple[Any, list, list[np.ndarray]],
          backend_out: list[np.ndarray] | None, baseline_rel_l2: float, limit: float) -> Path:
    """Write the segment's bundle (`segment`: its program, inputs and float64 expected outputs); the script exits 1
    when the backend's relative L2 vs float64 exceeds `limit`. Returns the script's path."""
    program, inputs, expected = segment
    return repro.write(out, repro.Bundle(
        title=title, tool="locate", backend=where.backend, precision=where.precision, device=where.device,
        program=program, inputs=list(inputs), expected=expected, observed=backend_out, rule=repro.REL_L2,
        limit=limit, baseline={"rel_l2": float(baseline_rel_l2)}, baseline_label="torch eager", flags=where.flags,
        versions=where.versions, refusal_hint="; rerun with --no-repro"))
