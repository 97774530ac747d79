"""Cut a contiguous run of ops out of an exported graph as a standalone program, so any backend can be asked
about just those ops (no "mark all outputs", which changes what a compiler fuses)."""
from __future__ import annotations

import contextlib
import copy
import io
import operator
import os
import sys
import tempfile
from collections.abc import Iterator

import torch
from torch import fx
from torch.utils._pytree import tree_map

from fpdiff.core.errors import MESSAGE_CHARS, TORCH_EXPORT, StageError, plain
from fpdiff.core.precision import Precision
from fpdiff.model import graph
from fpdiff.model.weights import real


@contextlib.contextmanager
def _quiet() -> Iterator[list[str]]:
    """Holds what is written to stdout and stderr inside, at the file descriptors and at sys.stdout/sys.stderr
    (torch.export prints whole graphs when it fails, with print() and through handlers of its own); the text
    is handed back, not shown."""
    held: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as tmp, contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(out):
        for stream in (sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()
        saved = [os.dup(1), os.dup(2)]
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield held
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            tmp.seek(0)
            held.append(out.getvalue() + tmp.read().decode(errors="replace"))


def export_at(module: torch.nn.Module, inputs: tuple, p: Precision, variant: graph.ShapeVariant,
              declared, lazy: bool = False) -> torch.export.ExportedProgram:
    """The model exported at P as a backend gets it (`lazy`: graph.export's); a failure is torch.export's, charged
    to that stage in one line naming the user's source line where export stopped (check reports the same cell as
    an `error` there)."""
    with _quiet():
        try:
            return graph.export(module, inputs, p, variant, declared, lazy=lazy)
        except Exception as e:  # any exporter failure: a data-dependent branch, an op it cannot trace
            text = plain(str(e))
            where = graph.source_line(text)
            first = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
            at = f" at {where} ({_code_at(text, where)})" if where else ""
            raise StageError(TORCH_EXPORT, "torch.export",
                             f"{type(e).__name__}{at}: {first}"[:MESSAGE_CHARS]) from e


def _code_at(trace: str, where: str) -> str:
    """The source text a trace shows under its frame `file:line` (the line torch.export stopped at)."""
    path, _, line = where.rpartition(":")
    lines = trace.splitlines()
    for i in range(len(lines) - 2, -1, -1):
        if path in lines[i] and f"line {line}" in lines[i]:
            return lines[i + 1].strip()
    return ""


def units(gm: fx.GraphModule) -> list[list[fx.Node]]:
    """Ops in graph order, each with the getitem nodes that unpack it (never split from their producer). An op with
    no value and no users (the export's dtype assertion) goes with the next op: alone, a segment of it has nothing
    to hand out."""
    out: list[list[fx.Node]] = []
    held: list[fx.Node] = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is operator.getitem and out and n.args[0] in out[-1]:
            out[-1].append(n)
        elif n.meta.get("val") is None and not n.users:
            held.append(n)
        else:
            out.append([*held, n])
            held = []
    if held and out:
        out[-1].extend(held)
    elif held:
        out.append(held)
    return out


def _set_attr(root: torch.nn.Module, target: str, value) -> None:
    *path, leaf = target.split(".")
    mod = root
    for p in path:
        if not hasattr(mod, p):
            mod.add_module(p, torch.nn.Module())
        mod = getattr(mod, p)
    if isinstance(value, torch.nn.Parameter):
        mod.register_parameter(leaf, value)
    elif isinstance(value, torch.Tensor):
        mod.register_buffer(leaf, value)
    else:
        setattr(mod, leaf, value)


def get_attr(root: torch.nn.Module, target: str):
    obj = root
    for p in target.split("."):
        obj = getattr(obj, p)
    return obj


def cut(gm: fx.GraphModule, nodes: list[fx.Node]) -> tuple[fx.GraphModule, list[str], list[str]]:
    """A GraphModule computing `nodes`; its inputs are the values they take from outside (weights stay inside),
    its outputs every value they hand to the rest of the graph (or the last one)."""
    inside = set(nodes)
    g = fx.Graph()
    root = torch.nn.Module()
    env: dict[fx.Node, fx.Node] = {}
    inputs: list[str] = []
    def bring(a: fx.Node) -> None:
        if a in inside or a in env:
            return
        if a.op == "get_attr":  # a weight cast per op (model/weights.py) is made real: segments are saved
            _set_attr(root, a.target, real(get_attr(gm, a.target)))
            env[a] = g.get_attr(a.target)
        elif a.op == "call_function" and not isinstance(a.meta.get("val"), torch.Tensor) and a.all_input_nodes:
            for b in a.all_input_nodes:  # a size read off a tensor (sym_size): recompute it inside
                bring(b)
            env[a] = g.node_copy(a, lambda x: env[x])
        else:
            env[a] = g.placeholder(a.name)
            inputs.append(a.name)

    for n in nodes:
        for a in n.all_input_nodes:
            bring(a)
        env[n] = g.node_copy(n, lambda x: env[x])
    leaving = [n for n in nodes if any(u not in inside for u in n.users)
               and isinstance(n.meta.get("val"), torch.Tensor)]
    if not leaving:
        leaving = [nodes[-1]]
    g.output(tuple(env[n] for n in leaving))
    return fx.GraphModule(root, g), inputs, [n.name for n in leaving]


# Ops whose dtype argument reinterprets bits rather than converting values: widening it would change their meaning.
_BIT_VIEWS = {torch.ops.aten.view.dtype}


def _wide(x):
    """A float dtype read as float64 (complex as complex128); anything else unchanged."""
    if isinstance(x, torch.dtype):
        if x.is_complex:
            return torch.complex128
        if x.is_floating_point:
            return torch.float64
    return x


def _wide_value(v):
    if isinstance(v, fx.GraphModule):
        return widen(v)
    if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()):
        return v.to(_wide(v.dtype))
    return v


def widen(gm: fx.GraphModule, weights: torch.nn.Module | None = None) -> fx.GraphModule:
    """The same program with every float computed in float64: the program's float dtype arguments (a model's own
    `.to(torch.float32)`, a factory's `dtype=`, an `_assert_tensor_metadata`) read as float64, in the graphs of
    higher-order ops too, and weights taken from `weights` (the model cast to float64) where it holds them, else
    the program's own constants widened. Node names stay those of `gm`, so values pair one to one with a run of
    `gm` itself: a cast the model makes at one precision and not another cannot unpair them."""
    g = copy.deepcopy(gm.graph)
    root = torch.nn.Module()
    for n in g.nodes:
        if n.op == "call_function" and n.target not in _BIT_VIEWS:
            n.args, n.kwargs = tree_map(_wide, (n.args, n.kwargs))
        elif n.op == "get_attr" and not _has_attr(root, n.target):
            own = get_attr(gm, n.target)
            theirs = _find(weights, n.target) if weights is not None else None
            use = theirs if (isinstance(theirs, torch.Tensor) and isinstance(own, torch.Tensor)
                             and theirs.shape == own.shape) else own
            _set_attr(root, n.target, _wide_value(use))
        elif n.op == "call_module":  # export's input guards: no arithmetic, kept as they are
            _set_attr(root, n.target, get_attr(gm, n.target))
    return fx.GraphModule(root, g)


def _find(root: torch.nn.Module, target: str):
    try:
        return get_attr(root, target)
    except AttributeError:
        return None


def _has_attr(root: torch.nn.Module, target: str) -> bool:
    return _find(root, target) is not None


def values(gm: fx.GraphModule, inputs: tuple, keep: set[str] | None = None) -> dict[str, object]:
    """Every node's value from one eager run (what segments are fed; small models only hold them all), or only
    those named in `keep` (one segment of a real-size model: the rest is freed after its last use)."""
    vals: dict[str, object] = {}

    class Rec(fx.Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            if keep is None or n.name in keep:
                vals[n.name] = r
            return r

    with torch.no_grad():
        Rec(gm).run(*inputs)
    return vals


def values64(gm: fx.GraphModule, weights: torch.nn.Module, inputs: tuple,
             keep: set[str] | None = None) -> dict[str, object]:
    """Every node's float64 value (or those named in `keep`), keyed by the node names of `gm` itself: `gm` widened
    (its dtype arguments and weights), run under the dispatch-level promotion (ops with no float64 kernel by their
    float64 decomposition)."""
    from fpdiff.model.float64 import float64_everywhere
    xs = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    with float64_everywhere():
        return values(widen(gm, weights), xs, keep)


def dynamic_dims(gm: fx.GraphModule, names: list[str]) -> dict[str, dict[int, object]] | None:
    """For a segment cut from a dynamic program: which dims of its inputs were symbolic, as torch.export wants."""
    from torch.export import Dim
    by_name = {n.name: n for n in gm.graph.nodes}
    spec = {}
    for name in names:
        val = by_name[name].meta.get("val")
        if isinstance(val, torch.Tensor):
            dims = {i: Dim.AUTO for i, s in enumerate(val.shape) if isinstance(s, torch.SymInt)}
            spec[name] = dims or None
    return spec if any(spec.values()) else None
