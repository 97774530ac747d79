"""A torch model at a low precision except chosen ops, which compute in fp32: the form a plan is verified and
shipped in (eager, torch.compile, torch.export, ONNX).

The rewrite starts from a program and keeps its dtype semantics. Its units are the ops computing in the program's
working dtype (`WORKING`: the low dtype for a plan's program, the model as cast, as check runs it; fp32 for
autocast's graph). A unit not kept computes at the low dtype, a kept unit in fp32: its inputs of the working dtype
are cast, and so is a dtype it names (`.to(x.dtype)` in the model is a literal dtype in the program). Every other op
runs as the program has it, on inputs of the program's dtypes, but a cast (`.to`) reads whatever it is given and
an op computing in a wider float by promotion takes a kept op's fp32 value unrounded. So with nothing kept, a plan's
program is exactly the model as cast, its dtype-dependent branches included."""
from __future__ import annotations

import copy
import functools
import operator

import torch

from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.quiet import quieted
from fpdiff.model import graph
from fpdiff.model.weights import LazyCast, cast_copy

_to = torch.ops.aten.to.dtype  # returns its input itself when the dtype already matches: free in eager
WORKING = "fpdiff_working_dtype"  # GraphModule.meta key: the dtype whose ops are the program's units

# Ops that only move or regroup one input's values: they take their input's dtype and are never a plan unit.
MOVES = {"view", "_unsafe_view", "reshape", "expand", "expand_as", "permute", "transpose", "t", "unsqueeze",
          "squeeze", "slice", "select", "clone", "alias", "contiguous", "detach", "split", "split_with_sizes",
          "chunk", "unbind", "flatten", "unflatten", "narrow", "view_as", "flip", "repeat", "getitem",
          "dropout", "lift_fresh_copy", "as_strided"}
# Casts: what they read does not change what they make, so they take any input dtype as it comes.
CASTS = {"to", "_to_copy", "type_as"}
# Higher-order ops that only set a mode around a subgraph (transformers' rotary code runs under no_grad with
# autocast disabled): inlined, so their ops are units like any other and no dtype assert of theirs stays behind.
_MODE_WRAPPERS = ("wrap_with_set_grad_enabled", "wrap_with_autocast")


def op_name(target) -> str:
    if target is operator.getitem:
        return "getitem"
    name = getattr(target, "__name__", str(target))
    return name.split(".")[0]


def _dtypes(val) -> list[torch.dtype]:
    """The float dtypes of a value (a tensor, or the tensors of a tuple)."""
    if isinstance(val, torch.Tensor):
        return [val.dtype] if val.is_floating_point() else []
    if isinstance(val, (tuple, list)):
        return [d for v in val for d in _dtypes(v)]
    return []


def _pd(n) -> torch.dtype | None:
    """A value's float dtype in the program (None: not a float tensor, or a tuple)."""
    val = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return val.dtype if isinstance(val, torch.Tensor) and val.is_floating_point() else None


def working(gm: torch.fx.GraphModule) -> torch.dtype:
    return gm.meta.get(WORKING, torch.float32)


def _is_move(n: torch.fx.Node) -> bool:
    """A pure move of one input's values; a reinterpreting view (view.dtype) changes dtype and is not."""
    if n.op != "call_function" or op_name(n.target) not in MOVES or not n.args:
        return False
    first = n.args[0]  # split, chunk, unbind: a tuple of the input's dtype
    return (n.target is operator.getitem or not isinstance(first, torch.fx.Node)
            or set(_dtypes(n.meta.get("val"))) == {_pd(first)})


def units(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The ops a plan can keep in fp32: every call computing in the program's working dtype, not a move, not a
    bitcast (`view(dtype)` reinterprets bits: its dtype is not a precision, and it runs as the program has it)."""
    w = working(gm)
    return [n for n in gm.graph.nodes if n.op == "call_function" and not _is_move(n)
            and n.target is not torch.ops.aten.view.dtype and w in _dtypes(n.meta.get("val"))]


def apply(gm: torch.fx.GraphModule, keep: set[str] | frozenset[str], low: torch.dtype,
          lazy: bool = False) -> torch.fx.GraphModule:
    """A copy of a program (`program_module`, `fp32_module`) whose units compute at `low` except `keep`, in fp32.
    Float inputs are taken and outputs given in fp32 (float64 ones stay float64); weights are stored in the dtype
    their users compute in. The copy shares the program's weights until it stores one in another dtype (`lazy`: cast
    as each op reads it, for eager runs of real-size models; such a program cannot be exported)."""
    gm = copy.deepcopy(gm, {id(t): t for t in (*gm.parameters(), *gm.buffers())})  # replaced below, never written
    g = gm.graph
    w = working(gm)
    names = {n.name for n in units(gm)}
    unknown = sorted(set(keep) - names)
    if unknown:
        raise UsageError(f"the plan keeps {unknown[0]}, which is not an op of this model's graph")
    want = {name: (torch.float32 if name in keep else low) for name in names}
    for n in list(g.nodes):  # the program's dtype asserts (after .float(), .to()): dtypes change here on purpose
        if n.op == "call_function" and n.target is torch.ops.aten._assert_tensor_metadata.default:
            g.erase_node(n)
    cur = _store_weights(gm, want, low, lazy)  # known dtype of each float value in the new graph
    casts: dict[tuple[torch.fx.Node, torch.dtype], torch.fx.Node] = {}

    def cast(a, t: torch.dtype | None, before: torch.fx.Node):
        if t is None or not isinstance(a, torch.fx.Node) or _pd(a) is None or cur.get(a) == t:
            return a  # not a float tensor (tuples are read through getitem), or already in t
        if (a, t) not in casts:
            with g.inserting_before(before):
                casts[(a, t)] = g.call_function(_to, (a, t))
            cur[casts[(a, t)]] = t
        return casts[(a, t)]

    for n in list(g.nodes):
        if n.op == "placeholder":
            if _pd(n) is not None:
                cur[n] = torch.float64 if _pd(n) == torch.float64 else torch.float32  # the caller's inputs
        elif n.op == "call_function" and n.name in want:
            _compute_at(n, want[n.name], w, lambda a, t, n=n: cast(a, t, n))
            cur[n] = want[n.name] if _pd(n) is not None else None
        elif n.op == "call_function" and _is_move(n):
            first = n.args[0]  # a move keeps its input's dtype; an item of a tuple is not known here
            cur[n] = cur.get(first) if n.target is not operator.getitem else None
        elif n.op == "call_function":  # as in the program: each float input in its program dtype, except ...
            if op_name(n.target) not in CASTS:
                # ... an fp32 value where the program had the working dtype, read by an op computing in a wider
                # float by promotion (T5's norm: its fp16 input times an fp32 rsqrt): the output dtype is the same,
                # and a kept op's fp32 result is not rounded on its way into the model's own fp32 arithmetic
                wider = bool(_dtypes(n.meta.get("val")))
                n.args, n.kwargs = torch.fx.node.map_aggregate((n.args, n.kwargs), lambda a, n=n, wider=wider: cast(
                    a, None if wider and _pd(a) == w and cur.get(a) == torch.float32 else _pd(a), n))
            cur[n] = _pd(n)
        elif n.op == "output":
            n.args = torch.fx.node.map_aggregate(n.args, lambda a, n=n: cast(
                a, torch.float64 if _pd(a) == torch.float64 else torch.float32, n))
    g.lint()
    gm.recompile()
    return gm


def _compute_at(n: torch.fx.Node, t: torch.dtype, w: torch.dtype, cast) -> None:
    """A unit computing in t: its inputs of the working dtype cast to t, the others as in the program, and a
    working dtype it names (a cast's target, a factory's dtype) made t."""
    def arg(a):
        if isinstance(a, torch.fx.Node):
            return cast(a, t if _pd(a) == w else _pd(a))
        return t if isinstance(a, torch.dtype) and a == w else a
    n.args = torch.fx.node.map_aggregate(n.args, arg)
    n.kwargs = dict(torch.fx.node.map_aggregate(n.kwargs, arg))


def _store_weights(gm: torch.fx.GraphModule, want: dict[str, torch.dtype], low: torch.dtype,
                   lazy: bool = False) -> dict[torch.fx.Node, torch.dtype | None]:
    """Each float weight of the working dtype stored in the dtype its readers compute in (through moves): `low`
    when all read it at `low`, else fp32. The dtype of each weight as stored."""
    w = working(gm)

    def readers(n: torch.fx.Node) -> set[torch.dtype]:
        out: set[torch.dtype] = set()
        for u in n.users:
            if u.name in want:
                out.add(want[u.name])
            elif _is_move(u):
                out |= readers(u)
            else:
                out.add(_pd(n) or torch.float32)
        return out
    stored: dict[torch.fx.Node, torch.dtype | None] = {}
    for n in gm.graph.nodes:
        if n.op != "get_attr":
            continue
        owner_path, _, leaf = n.target.rpartition(".")
        owner = gm.get_submodule(owner_path) if owner_path else gm
        t = getattr(owner, leaf, None)
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        dts = readers(n)
        if _pd(n) == w and dts:
            dtype = low if dts == {low} else torch.float32
            new = LazyCast(t.detach(), dtype) if lazy and t.dtype != dtype else t.detach().to(dtype)
            if isinstance(t, torch.nn.Parameter):
                new = torch.nn.Parameter(new, requires_grad=False)
            setattr(owner, leaf, new)
            t = new
        stored[n] = t.dtype
    return stored


def _inline_mode_wrappers(gm: torch.fx.GraphModule) -> None:
    """Inline each no_grad/autocast-mode subgraph into its parent (repeatedly: they nest)."""
    g = gm.graph
    while True:
        n = next((n for n in g.nodes if n.op == "call_function" and
                  getattr(n.target, "__name__", "") in _MODE_WRAPPERS), None)
        if n is None:
            break
        i, sub_node = next((i, a) for i, a in enumerate(n.args) if isinstance(a, torch.fx.Node)
                           and a.op == "get_attr")
        sub = getattr(gm, sub_node.target)
        operands = n.args[i + 1:]
        val_map = dict(zip([p for p in sub.graph.nodes if p.op == "placeholder"], operands))
        for a in sub.graph.nodes:  # the subgraph's own constants, copied up under unique names
            if a.op == "get_attr":
                name = f"{sub_node.target}_{a.target}".replace(".", "_")
                setattr(gm, name, functools.reduce(getattr, a.target.split("."), sub))
                with g.inserting_before(n):
                    val_map[a] = g.get_attr(name)
                    val_map[a].meta = dict(a.meta)
        with g.inserting_before(n):
            out = g.graph_copy(sub.graph, val_map)
        for u in list(n.users):
            if u.target is operator.getitem:
                u.replace_all_uses_with(out[u.args[1]])
                g.erase_node(u)
        g.erase_node(n)  # its results are read only through getitem: all replaced above
        if not sub_node.users:
            g.erase_node(sub_node)
            if not any(a.op == "get_attr" and a.target == sub_node.target for a in g.nodes):
                delattr(gm, sub_node.target)
    g.lint()
    gm.recompile()


def program_module(module: torch.nn.Module, inputs: tuple, p: prec.Precision,
                   dynamic_shapes=None) -> torch.fx.GraphModule:
    """The program check runs at `p`: the model cast to p, exported (its dtype-dependent branches taken for p),
    in-place ops made functional, mode subgraphs inlined; its weights held in fp32 (the model's own values), so a
    kept op reads them unrounded. Raises UsageError when the model at p cannot be exported."""
    args = prec.cast_inputs(inputs, p)
    try:
        # torch.export quiet: its warnings and the partial graph it prints on a failed export (its error says what
        # matters, and goes to the user as one line)
        with quieted("torch", stderr=True):  # traced from fake weights at p: no cast copy of the model is made
            ep = (graph.lazy_export(module, args, p.dtype, dynamic_shapes, then=graph.functional) if p.is_cast else
                  graph.functional(torch.export.export(graph.cast_module(module, p), args,
                                                       dynamic_shapes=dynamic_shapes, strict=False)))
    except Exception as e:  # the exporter's refusal of the user's model (data-dependent branches and the like)
        raise UsageError(_export_refusal(e, p)) from e
    gm = ep.module()
    _inline_mode_wrappers(gm)
    gm.meta[WORKING] = p.dtype
    master = cast_copy(module, torch.float32)  # the model's own fp32 tensors, shared
    held: dict[int, torch.Tensor] = {}  # one fp32 tensor per weight of the model: tied weights stay tied
    for name, t in list(gm.named_parameters(remove_duplicate=False)) + list(gm.named_buffers(remove_duplicate=False)):
        try:
            orig = master.get_parameter(name) if isinstance(t, torch.nn.Parameter) else master.get_buffer(name)
        except AttributeError:  # a constant the export made: kept as the program has it
            continue
        if t.is_floating_point() and t.dtype == p.dtype and orig.shape == t.shape:
            if id(orig) not in held:
                held[id(orig)] = (torch.nn.Parameter(orig.detach(), requires_grad=False)
                                  if isinstance(t, torch.nn.Parameter) else orig.detach())
            owner_path, _, leaf = name.rpartition(".")
            setattr(gm.get_submodule(owner_path) if owner_path else gm, leaf, held[id(orig)])
    return gm


def _export_refusal(e: Exception, p: prec.Precision) -> str:
    """One line: why the model at p cannot be exported, where in the user's code, and why plan stops there."""
    import traceback

    from fpdiff.core.errors import plain
    where = graph.source_line("".join(traceback.format_tb(e.__traceback__)))
    first = " ".join(plain(str(e)).split()).split(". ")[0][:200]  # the exporter's first sentence says it
    return (f"torch.export cannot export this model at {p.name}{f' ({where})' if where else ''}: "
            f"{type(e).__name__}: {first}; plan evaluates the program check runs at {p.name}, and the fp32 export "
            f"is not that model (it takes the fp32 side of the model's dtype-dependent branches)")


def fp32_module(module: torch.nn.Module, inputs: tuple, dynamic_shapes=None) -> torch.fx.GraphModule:
    """The model's fp32 export as a graph module (autocast's starting point: its units are the fp32 ops), with
    in-place ops made functional (casts cannot follow a mutation into a copy) and mode subgraphs inlined."""
    m = cast_copy(module, torch.float32)
    ep = torch.export.export(m, prec.cast_inputs(inputs, prec.FP32), dynamic_shapes=dynamic_shapes, strict=False)
    gm = graph.functional(ep).module()
    _inline_mode_wrappers(gm)
    gm.meta[WORKING] = torch.float32
    return gm
