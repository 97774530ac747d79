"""Exported programs (`torch.export.save` files, .pt2): the program's module, the example inputs saved with it (or
--inputs), the dynamic dims it was exported with. Written as a spec file that loads the program, so workers, repro
bundles and suggested commands load it as they load any spec."""
from __future__ import annotations

import functools
import importlib
import io
import sys
from pathlib import Path

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from fpdiff.core.errors import UsageError
from fpdiff.sources.base import Source, digest, importable
from fpdiff.sources.module import write_spec
from fpdiff.sources.spec import import_spec, load_spec, module_name, quiet_imports

SUFFIX = ".pt2"
PROGRAMS_DIR = "fpdiff-out/programs"  # beside the module specs: what a run writes for the user to run again

_SPEC = '''"""Written by fpdiff for the exported program {path}: its module, exported again at each precision;
inputs {how}."""
from pathlib import Path

import torch

from fpdiff.sources import program

PATH = {path!r}


def model():
    return program.module(PATH)


def inputs():
    return tuple(torch.load(Path(__file__).parent / "inputs.pt"))


def dynamic_shapes():
    return program.dynamic_shapes(PATH)
'''


def load(path: Path, seed: int, inputs: str | None) -> Source:
    """The program at `path` as a torch source (label: the user's file)."""
    program = read(str(path.resolve()))
    names = list(program.graph_signature.user_inputs)
    args = _given(Path(inputs), names) if inputs else saved_inputs(program, path)
    how = f"from {inputs}" if inputs else "saved with the program"
    data = io.BytesIO()
    torch.save(args, data)
    text = _SPEC.format(path=str(path.resolve()), how=how)
    made = digest(text, data.getvalue(), str(path.stat().st_mtime_ns))[:12]
    spec = write_spec(Path(PROGRAMS_DIR) / f"{path.stem}-{made}", text, {"inputs.pt": data.getvalue()})
    source = load_spec(Path(spec), label=str(path), seed=seed)
    source.input_names = names
    dims = {n: sorted(d) for n, d in (source.dynamic_shapes or {}).items() if d}
    source.notes["program"] = {"inputs": how, "dynamic dims": dims}
    return source


@functools.lru_cache(maxsize=4)
def read(path: str) -> torch.export.ExportedProgram:
    """The saved program (read once per process); a file torch.export cannot load is one line."""
    try:
        return torch.export.load(path)
    except Exception as e:  # noqa: BLE001 - not a program, or one from an incompatible torch: one line
        first = (str(e).strip().splitlines() or [""])[0]
        raise UsageError(f"{path} is not an exported program torch.export.load can read ({type(e).__name__}: "
                         f"{first})") from None


def op_modules(program: torch.export.ExportedProgram | torch.fx.GraphModule) -> tuple[str, ...]:
    """What must be imported before `program` can be loaded: torch.export.load refuses a program calling a custom op
    no import registered (a transformers MoE's grouped_mm_fallback). A module importable by name is its name; one
    loaded from a file (a spec) is its file."""
    from torch._library.custom_ops import OPDEFS
    root = program.graph_module if isinstance(program, torch.export.ExportedProgram) else program
    graphs = [m.graph for m in root.modules() if isinstance(m, torch.fx.GraphModule)]
    targets = {n.target for g in graphs for n in g.nodes if isinstance(n.target, torch._ops.OpOverload)}
    defining = {OPDEFS[t.name()]._init_fn.__module__ for t in targets if t.name() in OPDEFS}
    return tuple(sorted(_importable(sys.modules.get(name), name) for name in defining))


def _importable(mod, name: str) -> str:
    """A module's name where a fresh process finds it by name on its path, else its file (a spec, a script)."""
    where = getattr(mod, "__file__", None)
    return name if importable(name) or not where else where


def import_op_modules(requires: tuple[str, ...]) -> None:
    """Register a program's custom ops in this process (op_modules' answer): by name, or a spec file by its path."""
    for entry in requires:
        if entry.endswith(".py"):
            if module_name(Path(entry)) not in sys.modules:  # imported again, its ops would be defined twice
                import_spec(Path(entry))
        else:
            with quiet_imports():
                importlib.import_module(entry)


def module(path: str) -> torch.nn.Module:
    """The program as a module fpdiff exports again at each precision (its weights cast like a spec model's). Its
    train/eval mode was fixed at export: the module's refusal of eval() is lifted, eval() changes nothing in it."""
    m = read(path).module()
    for name in ("train", "eval"):
        m.__dict__.pop(name, None)
    return m


def saved_inputs(program: torch.export.ExportedProgram, path: Path) -> tuple:
    """The example inputs torch.export.save kept, as positional tensors in the program's input order."""
    ex = program.example_inputs
    leaves = [x for x in tree_leaves(ex)] if ex is not None else []
    n = len(program.graph_signature.user_inputs)
    if not leaves or len(leaves) != n or not all(isinstance(t, torch.Tensor) for t in leaves):
        raise UsageError(f"{path} holds no example inputs fpdiff can use ({n} tensor inputs expected): give --inputs "
                         f"NPZ with an array per input ({', '.join(program.graph_signature.user_inputs)})")
    return tuple(t.detach().cpu() for t in leaves)


def dynamic_shapes(path: str) -> dict | None:
    """The program's symbolic input dims as torch.export's dynamic_shapes (one Dim per symbol, its range kept)."""
    program = read(path)
    ranges = {str(k): v for k, v in program.range_constraints.items()}
    found: dict[str, torch.export.Dim] = {}
    out: dict[str, dict[int, torch.export.Dim]] = {}
    user = set(program.graph_signature.user_inputs)
    for node in program.graph.nodes:
        val = node.meta.get("val")
        if node.op != "placeholder" or node.name not in user or not isinstance(val, torch.Tensor):
            continue
        dims = {i: _dim(str(d), ranges.get(str(d)), found)
                for i, d in enumerate(val.shape) if isinstance(d, torch.SymInt)}
        if dims:
            out[node.name] = dims
    return out or None


def _dim(symbol: str, vr, found: dict) -> torch.export.Dim:
    """One Dim per symbol, with the program's range where finite."""
    if symbol not in found:
        lo = int(vr.lower) if vr is not None and _finite(vr.lower) else None
        hi = int(vr.upper) if vr is not None and _finite(vr.upper) else None
        found[symbol] = torch.export.Dim(f"d_{symbol}", **({"min": lo} if lo is not None else {}),
                                         **({"max": hi} if hi is not None else {}))
    return found[symbol]


def _finite(x) -> bool:
    try:
        return abs(int(x)) < 2**62
    except (TypeError, ValueError, OverflowError):
        return False


def _given(path: Path, names: list[str]) -> tuple:
    """--inputs: one array per program input, by name."""
    from fpdiff.sources.npz import read_npz
    arrays = read_npz(path)
    missing = [n for n in names if n not in arrays]
    if missing:
        raise UsageError(f"inputs file {path} lacks arrays for inputs {missing} (it has {sorted(arrays)})")
    return tuple(torch.from_numpy(np.ascontiguousarray(arrays[n])) for n in names)

