"""The cell a backend prepares, as every backend sees it. Defined here, at the bottom, so that backends depend on this
contract and not on the runtime that implements it (runtime/task.py's Task)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from fpdiff.core.precision import Precision

# The model kinds (a job's SourceRef.kind, a backend's `kinds`): a torch model (spec file or example: its module and
# the programs exported from it), an ONNX graph (a file), and a program already at its precision, which a backend
# runs as written and never casts: a torch.export `.pt2` (a segment cut by locate, a mixed plan trial) or an `.onnx`
# graph (a mixed ONNX plan trial). A backend that takes TORCH runs `.pt2` programs; one that takes ONNX, `.onnx` ones.
TORCH, ONNX, PROGRAM = "torch", "onnx", "program"


class Variant(Protocol):
    """A shape variant: which declared dynamic dims it keeps static (None: every dim static)."""
    @property
    def name(self) -> str: ...

    @property
    def static(self) -> frozenset[str] | None: ...


class ArtifactCache(Protocol):
    """Where compiled artifacts go, keyed by everything that can change them (runtime/cache.py)."""
    def get_or_build(self, *key: str, suffix: str, build: Callable[[Path], None]) -> tuple[Path, bool]: ...

    def beside(self, built: Path, suffix: str) -> Path: ...


@runtime_checkable
class Task(Protocol):
    """One (model, precision, device, shape variant) cell, handed to Backend.prepare_task and prepare_marked."""
    precision: Precision
    device: str
    variant: Variant
    cache: ArtifactCache
    flags: tuple[str, ...]  # the user's flags for this backend (backend_flags)
    converted: bool  # an ONNX source runs its opset conversion: its own graph failed on this backend
    given: str | None  # a quantized cell's own quantized file (the user's), run as it is: nothing is quantized

    @property
    def kind(self) -> str:
        """TORCH, ONNX or PROGRAM."""
        ...

    @property
    def is_torch(self) -> bool:
        """A torch model, or a `.pt2` program: program() and module() exist."""
        ...

    @property
    def is_program(self) -> bool:
        """A program already at its precision (either form): run as written, never cast."""
        ...

    @property
    def requested_dtype(self) -> str:
        """The dtype arithmetic was asked to run in (the low dtype of an autocast cell, whose weights stay fp32)."""
        ...

    def calibration(self) -> list[tuple[Any, ...]]:
        """The inputs a quantized cell is calibrated on (never the inputs it is judged on), each like inputs()."""
        ...

    def calibration_digest(self) -> str:
        """A digest of calibration(): with the model and format, what names a cached quantized artifact."""
        ...

    def inputs(self) -> tuple[Any, ...]:
        """Inputs as the backend receives them: float inputs in the precision's dtype (fp32 under autocast)."""
        ...

    def program(self) -> torch.export.ExportedProgram:
        """The torch program to compile: cast to the precision, the autocast graph under amp-*, a `.pt2` as is."""
        ...

    def module(self, streamed: bool = False) -> torch.nn.Module:
        """A fresh copy of the nn.Module at the precision (for backends that run the module or enter autocast); it
        shares the model's weights where their dtype is the precision's. `streamed`: each weight cast when an op
        reads it wherever a whole cast copy would be large, and always at float64 (what eager CPU runs of real-size
        models want); the same numbers."""
        ...

    def onnx_file(self, judge: bool = False) -> Path:
        """The ONNX graph at the precision: exported from the program, the ONNX source cast, an `.onnx` program as
        is. `judge`: an ONNX source's opset conversion (what the reference evaluator reads)."""
        ...

    def dynamic_dims(self) -> list[list[int]]:
        """Per positional input, the dims this shape variant leaves dynamic."""
        ...

    def key(self, *extra: str) -> tuple[str, ...]:
        """Cache key parts for an artifact of this cell."""
        ...

    def at(self, precision: Precision) -> Task:
        """The same cell at another precision (a backend whose precision is a hint compiles the fp32 graph)."""
        ...
