"""What to run next: a precision-loss or mismatch cell names the analysis that explains it, as a command to paste
(locate: where a backend departs, or which op loses the precision; plan: the ops to keep in fp32), each once."""
from __future__ import annotations

import shlex

import torch

from fpdiff.analysis.options import RunOptions
from fpdiff.core import precision as prec
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import Grid
from fpdiff.model.graph import STATIC


def next_commands(grid: Grid, cells: list[Cell], shared: RunOptions) -> list[str]:
    """The distinct commands that explain the grid's precision-loss and mismatch cells, in grid order."""
    found = (_command(grid, c, k.precision, shared) for c, k in zip(cells, grid.cells))
    return list(dict.fromkeys(c for c in found if c))


def _command(grid: Grid, cell: Cell, p: prec.Precision, shared: RunOptions) -> str | None:
    """locate on the cell's backend for a mismatch; plan for a 16-bit float cast that loses precision; locate's
    op-by-op analysis on the judge for other losses of a torch model; None for the rest."""
    place = ["--device", cell.device] * (cell.device != "cpu")
    if cell.status == Status.MISMATCH:
        variant = ["--shape-variant", cell.shape_variant] * (cell.shape_variant != STATIC.name)
        art = grid.artifacts.get((cell.backend, p.name))  # the user's own file: locate judges it, then localizes
        args, backend = ["locate", "--backend", cell.backend, "--precision", p.name, *place, *variant,
                         *(["--artifact", art] if art else [])], cell.backend
    elif cell.status == Status.PRECISION_LOSS and p.is_cast and p.dtype in (torch.float16, torch.bfloat16):
        args, backend = ["plan", "--precision", p.name, "--backend", cell.backend, *place], cell.backend
    elif cell.status == Status.PRECISION_LOSS and grid.source.ref.kind == "torch":
        args, backend = ["locate", "--backend", grid.judge_backend, "--precision", p.name], grid.judge_backend
    else:
        return None
    args[1:1] = [grid.source.ref.label]
    return "fpdiff " + shlex.join(args + _same_run(grid, backend, shared))


def _same_run(grid: Grid, backend: str, shared: RunOptions) -> list[str]:
    """The options that make the command see what the check saw: the plugin, the route, flags, inputs, shapes, the
    checkpoint's task and seed."""
    plugin = grid.reg.plugin_file(backend)
    out = ["--plugin", plugin] if plugin else []
    out += route_options(grid.reg.cls(backend).route)
    out += [a for f in grid.flags.get(backend, ()) for a in ("--backend-flag", f"{backend}={f}")]
    out += ["--inputs", str(shared.inputs)] if shared.inputs else []
    out += [a for name, dims in shared.shapes.items() for a in ("--shape", f"{name}={','.join(map(str, dims))}")]
    out += ["--task", shared.task] if shared.task else []
    return out + (["--seed", str(grid.seed)] if grid.seed else [])


def route_options(route) -> list[str]:
    """A routed backend's route as the command line gives it (none for a backend that runs here)."""
    if route is None:
        return []
    if route.python:
        return ["--backend-python", f"{route.name}={route.python}"]
    return ["--backend-host", f"{route.name}={route.host}", *(["--token-file", route.token_file] if route.token_file
                                                              else [])]
