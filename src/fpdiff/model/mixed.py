"""A torch model at a low precision except chosen ops, which compute in fp32: the form a plan is verified and
shipped in (eager, torch.compile, torch.export, ONNX)."""
from __future__ import annotations

import copy
import operator

import torch

from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.model import graph

_to = torch.ops.aten.to.dtype  # returns its input itself when the dtype already matches: free in eager

# Ops that only move or regroup one input's values: they take their input's dtype and are never a plan unit.
MOVES = {"view", "_unsafe_view", "reshape", "expand", "expand_as", "permute", "transpose", "t", "unsqueeze",
          "squeeze", "slice", "select", "clone", "alias", "contiguous", "detach", "split", "split_with_sizes",
          "chunk", "unbind", "flatten", "unflatten", "narrow", "view_as", "flip", "repeat", "getitem",
          "dropout", "lift_fresh_copy", "as_strided"}


def op_name(target) -> str:
    if target is operator.getitem:
        return "getitem"
    name = getattr(target, "__name__", str(target))
    return name.split(".")[0]


def _is_float(val) -> bool:
    if isinstance(val, torch.Tensor):
        return val.is_floating_point()
    if isinstance(val, (tuple, list)):
        return any(_is_float(v) for v in val)
    return False


def units(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The ops a plan can keep in fp32: every call producing floats that is not a pure move of values."""
    out = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or op_name(n.target) in MOVES:
            continue
        val = n.meta.get("val")
        if _is_float(val) and not (isinstance(val, torch.Tensor) and val.dtype == torch.float64):
            out.append(n)
    return out


def _float_dtype_kw(n: torch.fx.Node) -> bool:
    dt = n.kwargs.get("dtype")
    return isinstance(dt, torch.dtype) and dt.is_floating_point


def apply(gm: torch.fx.GraphModule, keep: set[str] | frozenset[str], low: torch.dtype) -> torch.fx.GraphModule:
    """A copy of an fp32 graph module (torch.export's .module()) whose units compute at `low` except `keep`, in
    fp32. Float inputs and outputs stay fp32; weights are stored in the dtype their users compute in."""
    gm = copy.deepcopy(gm)
    g = gm.graph
    names = {n.name: n for n in units(gm)}
    unknown = sorted(set(keep) - set(names))
    if unknown:
        raise UsageError(f"the plan keeps {unknown[0]}, which is not an op of this model's graph")
    want = {name: (torch.float32 if name in keep else low) for name in names}
    dtype: dict[torch.fx.Node, torch.dtype | None] = {}  # known float dtype of each value in the new graph
    casts: dict[tuple[torch.fx.Node, torch.dtype], torch.fx.Node] = {}
    _store_weights(gm, want, low)
    for n in list(g.nodes):  # the fp32 export's dtype asserts (after .float(), .to()): dtypes change here on purpose
        if n.op == "call_function" and n.target is torch.ops.aten._assert_tensor_metadata.default:
            g.erase_node(n)
    for n in list(g.nodes):
        if n.op == "placeholder":
            val = n.meta.get("val")
            dtype[n] = val.dtype if isinstance(val, torch.Tensor) and val.is_floating_point() else None
        elif n.op == "get_attr":
            dtype[n] = None  # the module may be cast after us (.float()): always cast at use, free when equal
        elif n.op == "call_function" and n.name in want:
            t = want[n.name]

            def cast(a, t=t, n=n):
                val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
                if not isinstance(val, torch.Tensor) or not val.is_floating_point() or dtype.get(a) == t:
                    return a  # not a float tensor (tuples are read through getitem), or already in t
                key = (a, t)
                if key not in casts:
                    with g.inserting_before(n):
                        casts[key] = g.call_function(_to, (a, t))
                    dtype[casts[key]] = t
                return casts[key]
            n.args = torch.fx.node.map_aggregate(n.args, cast)
            kwargs = dict(torch.fx.node.map_aggregate(n.kwargs, cast))
            if _float_dtype_kw(n):
                kwargs["dtype"] = t
            n.kwargs = kwargs
            val = n.meta.get("val")
            dtype[n] = t if isinstance(val, torch.Tensor) else None
        elif n.op == "call_function" and op_name(n.target) in MOVES and n.args:
            first = n.args[0]  # a move keeps its input's dtype; an item of a tuple is not known here
            known = isinstance(first, torch.fx.Node) and n.target is not operator.getitem
            dtype[n] = dtype.get(first) if known else None
        elif n.op == "output":
            def back(a, n=n):  # called right here, inside this iteration
                if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor) \
                        and a.meta["val"].is_floating_point() and dtype.get(a) != a.meta["val"].dtype:
                    with g.inserting_before(n):
                        return g.call_function(_to, (a, a.meta["val"].dtype))
                return a
            n.args = torch.fx.node.map_aggregate(n.args, back)
    g.lint()
    gm.recompile()
    return gm


def _store_weights(gm: torch.fx.GraphModule, want: dict[str, torch.dtype], low: torch.dtype) -> None:
    """Each float weight in the dtype of the units that read it (through moves); fp32 when they disagree."""
    def readers(n: torch.fx.Node) -> set[torch.dtype]:
        out: set[torch.dtype] = set()
        for u in n.users:
            if u.name in want:
                out.add(want[u.name])
            elif u.op == "call_function" and op_name(u.target) in MOVES:
                out |= readers(u)
            else:
                out.add(torch.float32)
        return out
    for n in gm.graph.nodes:
        if n.op != "get_attr":
            continue
        owner_path, _, leaf = n.target.rpartition(".")
        owner = gm.get_submodule(owner_path) if owner_path else gm
        t = getattr(owner, leaf, None)
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
            continue
        dts = readers(n)
        if dts == {low}:
            new = t.detach().to(low)
            if isinstance(t, torch.nn.Parameter):
                new = torch.nn.Parameter(new, requires_grad=False)
            setattr(owner, leaf, new)


def fp32_module(module: torch.nn.Module, inputs: tuple, dynamic_shapes=None) -> torch.fx.GraphModule:
    """The model's fp32 export as a graph module, with in-place ops made functional (casts cannot follow a
    mutation into a copy)."""
    m = copy.deepcopy(module).float()
    ep = torch.export.export(m, prec.cast_inputs(inputs, prec.get("fp32")), dynamic_shapes=dynamic_shapes, strict=False)
    return graph.functional(ep).module()
