"""A job's data file: the model's inputs, their names, its weights (a torch source) and the fingerprint that keys
every artifact built from it. One writer and one reader, so every analysis hands a worker the same thing."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch


def write(path: str | os.PathLike, *, inputs: Sequence, input_names: Sequence[str], fingerprint: str,
          state: Mapping | None = None) -> str:
    """Save the job data at `path` (atomically: a reader never sees half a file); returns the path as a string."""
    data: dict = {"fingerprint": fingerprint, "inputs": tuple(inputs), "input_names": list(input_names)}
    if state is not None:
        data["state"] = dict(state)
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(data, tmp)
    os.replace(tmp, path)
    return str(path)


def read(path: str | os.PathLike) -> dict:
    """The job data at `path`: fingerprint, inputs (tuple), input_names (list) and, for a torch source, state."""
    data = torch.load(path, weights_only=False)
    missing = {"fingerprint", "inputs", "input_names"} - set(data)
    if missing:
        raise ValueError(f"{path} is not fpdiff job data (no {', '.join(sorted(missing))})")
    return data
