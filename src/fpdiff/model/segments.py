"""Cut a contiguous run of ops out of an exported graph as a standalone program, so any backend can be asked
about just those ops (no "mark all outputs", which changes what a compiler fuses)."""
from __future__ import annotations

import operator

import torch
from torch import fx


def units(gm: fx.GraphModule) -> list[list[fx.Node]]:
    """Ops in graph order, each with the getitem nodes that unpack it (never split from their producer)."""
    out: list[list[fx.Node]] = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n.target is operator.getitem and out and n.args[0] in out[-1]:
            out[-1].append(n)
        else:
            out.append([n])
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
        if a.op == "get_attr":
            _set_attr(root, a.target, get_attr(gm, a.target))
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


def values(gm: fx.GraphModule, inputs: tuple) -> dict[str, object]:
    """Every node's value from one eager run (what segments are fed; small models only hold them all)."""
    vals: dict[str, object] = {}

    class Rec(fx.Interpreter):
        def run_node(self, n):
            r = super().run_node(n)
            vals[n.name] = r
            return r

    with torch.no_grad():
        Rec(gm).run(*inputs)
    return vals


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
