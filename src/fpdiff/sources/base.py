"""What every loader produces: a model's address, its inputs and what was done to bring it in."""
from __future__ import annotations

import hashlib
import importlib.machinery
import re
import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SourceRef:
    """Picklable address of a model, enough for a child process to load it again."""
    kind: str  # "torch" (spec file or example) or "onnx"
    path: str
    label: str
    original: str = ""  # an ONNX model's own file when `path` is its opset conversion (what the user deploys)
    requires: tuple[str, ...] = ()  # imports that register a program's custom ops (sources.program.op_modules)


@dataclass
class Source:
    ref: SourceRef
    inputs: tuple  # torch.Tensor for torch sources, np.ndarray for ONNX sources
    input_names: list[str]
    dynamic_shapes: object = None  # torch.export form, torch sources only
    tolerance: dict[str, float] = field(default_factory=dict)
    module: object = None  # nn.Module (torch) or onnx.ModelProto (onnx)
    fingerprint: str = ""
    notes: dict = field(default_factory=dict)  # how it was brought in: opset conversion, how inputs were made


def digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:20]


def importable(name: str) -> bool:
    """Whether a fresh process finds module `name` by name on its path: not `__main__` (a notebook, a script), nor a
    module loaded from a file under a name no path finder knows (a spec)."""
    top = name.split(".")[0]
    if top == "__main__":
        return False
    return top in sys.builtin_module_names or importlib.machinery.PathFinder.find_spec(top) is not None


def display_name(label: str) -> str:
    """A model's name as its user knows it: a module held in Python by its class, with the spec file it was written
    as (sources/module.py: the label that commands and JSON keep); any other label as it is."""
    m = re.fullmatch(r"(?:.*/)?modules/(\w+)-[0-9a-f]{12}/spec\.py", label.replace("\\", "/"))
    return f"{m.group(1)} (a module held in Python: {label})" if m else label
