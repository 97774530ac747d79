"""A job's data file: the model's inputs, their names, its weights (a torch source) and the fingerprint that keys
every artifact built from it. One writer and one reader, so every analysis hands a worker the same thing. The weights
are named by path (model/weights.py: written once per run, memory-mapped by every reader), or carried inline (a
remote worker's copy)."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch


def write(path: str | os.PathLike, *, inputs: Sequence, input_names: Sequence[str], fingerprint: str,
          state: Mapping | None = None, weights: str | None = None, calibration: Sequence | None = None) -> str:
    """Save the job data at `path` (atomically: a reader never sees half a file); returns the path as a string.
    `weights` names a weights file (model/weights.py), `state` carries the weights inline, `calibration` the input
    tuples a quantized cell is calibrated on."""
    data: dict = {"fingerprint": fingerprint, "inputs": tuple(inputs), "input_names": list(input_names)}
    if state is not None:
        data["state"] = dict(state)
    if weights is not None:
        data["weights"] = str(weights)
    if calibration:
        data["calibration"] = [tuple(c) for c in calibration]
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(data, tmp)
    os.replace(tmp, path)
    return str(path)


def read(path: str | os.PathLike) -> dict:
    """The job data at `path`: fingerprint, inputs (tuple), input_names (list) and, for a torch source, state (the
    weights file's tensors memory-mapped, when it names one)."""
    data = torch.load(path, weights_only=False)
    missing = {"fingerprint", "inputs", "input_names"} - set(data)
    if missing:
        raise ValueError(f"{path} is not fpdiff job data (no {', '.join(sorted(missing))})")
    if "weights" in data:
        from fpdiff.model import weights
        data["state"] = weights.load(data["weights"])
    return data


def of_source(path: str | os.PathLike, source, calibration: Sequence | None = None) -> str:
    """The job data of a whole model: its inputs, names and fingerprint, and a torch model's weights written once per
    run (model/weights.py) and named by path; the source's own model is mapped onto that file."""
    named = None
    if source.ref.kind == "torch":
        from fpdiff.model import weights
        from fpdiff.runtime import rundir
        named = weights.share(source.module, os.environ.get(rundir.ENV) or Path(path).parent)
    return write(path, inputs=source.inputs, input_names=source.input_names, fingerprint=source.fingerprint,
                 weights=named, calibration=calibration)
