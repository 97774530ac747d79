"""Low precision everywhere but in the nodes you keep: which nodes need float32 to fix a low-precision model?"""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.defs import OpSchema

from fpdiff.core.errors import UsageError
from fpdiff.onnxtools.dtypes import FLOATS, clamp_into, np_cast

HIGH = TensorProto.FLOAT  # what a kept node computes in
LOWS = (TensorProto.FLOAT16, TensorProto.BFLOAT16)
SHORT = {TensorProto.FLOAT16: "fp16", TensorProto.BFLOAT16: "bf16", TensorProto.FLOAT: "fp32",
         TensorProto.DOUBLE: "fp64"}
TYPE_STR = {TensorProto.FLOAT16: "tensor(float16)", TensorProto.BFLOAT16: "tensor(bfloat16)",
            TensorProto.FLOAT: "tensor(float)", TensorProto.DOUBLE: "tensor(double)"}
DTYPE_ATTRS = ("to", "dtype", "output_datatype")  # Cast; RandomNormal, EyeLike, Bernoulli...; window ops
STANDARD = ("", "ai.onnx")

# (op_type, input index): float inputs that keep the model's own type whatever their node computes in.
# Every input whose schema type list lacks the compute type (NonMaxSuppression boxes/scores/thresholds,
# DynamicQuantizeLinear x, QLinear* scales: "tensor(float)" only) is kept too, by the schema check in _plan;
# the entries here are the geometry inputs that decide *where* or *how many*, not data a low model computes on.
KEEP_TYPE = {
    ("Resize", 1): "roi: crop box coordinates (T2: no bfloat16 in the spec either)",
    ("Resize", 2): "scales: tensor(float) only in the spec; sets the output shape",
    ("Upsample", 1): "scales: tensor(float) only in the spec; sets the output shape",
    ("OneHot", 1): "depth: a class count that sets the output shape (rounded 2049 -> 2048 in fp16)",
}


def to_mixed(model: onnx.ModelProto, low: int, keep: Iterable[str] = (), clamp: bool = False) -> onnx.ModelProto:
    """A copy of a float32/float64 model whose float math runs in `low` (TensorProto.FLOAT16 or BFLOAT16),
    except in the nodes named in `keep`, which run in float32; Casts are inserted at the borders.

    The graph's inputs and outputs keep their types, so the same feeds work for every keep set.
    Float initializers and float Constant nodes hold no math: each is stored in the type its consumers
    compute in (one copy per type, the second under a new name), rounded without clamping, so a value that
    overflows or flushes in `low` does; with `clamp`, the small ones read in `low` are moved into its range
    first (clamp_into), those read in float32 stay the model's own. A node with subgraphs (If, Loop, Scan) in
    `keep`, or passing sequences or optionals, computes whole in the model's own types; one not kept has its
    subgraphs computed in `low` as cast_model does (so keep=() is the check's cast cell with the model's own
    inputs and outputs). Nodes
    outside the standard domain and nodes whose ONNX schema does not accept the compute type at all (Range in
    float16, Conv in bfloat16 before opset 22) compute in the model's own types, as if kept.
    Inputs that are geometry rather than data (KEEP_TYPE) and "tensor(float)"-only inputs keep their type.
    Attributes (epsilon, LayerNormalization's stash_type) stay as the op defines them; sequences are not cast.
    """
    keep = [keep] if isinstance(keep, str) else list(keep)
    if low not in LOWS:
        raise UsageError(f"low must be TensorProto.FLOAT16 or BFLOAT16, not {low!r}")
    names = {n.name for n in model.graph.node}
    unknown = [k for k in keep if k not in names]
    if unknown:
        raise UsageError(f"keep: no node named {unknown[0]!r} in the model's graph")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    _Mixer(m, low, set(keep), clamp=clamp).run()
    return m


def cast_model(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """A copy of a model whose float math, inputs and outputs are in `target` (like .half() on a torch model).

    Typed as the ONNX schema allows at the model's opset, so the graph passes full type checking: an input the
    schema allows only another type keeps the model's own (Resize's scales, NonMaxSuppression's boxes), a node
    whose schema refuses `target` (Conv in bfloat16 before opset 22) computes in the model's own type with Casts
    at its borders, the subgraphs of If, Loop and Scan are cast the same way (their float inputs and outputs in
    `target`, each node inside typed as its schema allows), and SequenceEmpty makes a sequence of `target`.
    The subgraphs keep the shapes of their values (value_info) with the new element types; the top graph's are
    left to shape inference, which types them from the inputs down. Attributes such as epsilon stay as the op
    defines them. `type_error` says whether the result passes."""
    if target not in FLOATS:
        raise UsageError(f"target must be an ONNX float type, not {target!r}")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    _Mixer(m, target, set(), io=True).run()
    return m


def type_error(model: onnx.ModelProto) -> str | None:
    """Why the model fails ONNX's full type check (control-flow subgraphs included), or None when it passes."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # ValidationError, InferenceError
        return " ".join(str(e).split())[:600] or type(e).__name__
    return None


class _Mixer:
    """One pass over a graph in order; `versions` holds each float tensor's name per type. With `io`, the graph's
    float inputs and outputs take the compute type too (a cast model, or a subgraph of one). `orig` holds the
    model's own type of every value (an outer name's too, in a subgraph), `new_type` the type each name has now.
    `shapes` is this graph as onnx's shape inference typed it (subgraphs included), where it could."""

    def __init__(self, m: onnx.ModelProto, low: int, keep: set[str], io: bool = False,
                 graph: onnx.GraphProto | None = None, parent: _Mixer | None = None,
                 shapes: onnx.GraphProto | None = None, clamp: bool = False):
        self.m, self.low, self.keep, self.io, self.clamp, self.parent = m, low, keep, io, clamp, parent
        self.g = m.graph if graph is None else graph
        if parent is None:
            try:
                shapes = onnx.shape_inference.infer_shapes(m).graph
            except Exception:  # an op onnx does not know: the types the producer wrote, then node by node
                shapes = None
            self.orig = _known_types(shapes if shapes is not None else m.graph)
            self.taken = _all_names(m.graph)
            self.outer: set[str] = set()
            self.new_type = dict(self.orig)
        else:  # a subgraph: outer names in the model's own types (the parent hands out their versions), and as
            own = _known_types(shapes if shapes is not None else self.g)  # they are now (a sequence the cast
            self.orig = {**parent.orig, **own}  # retyped)
            self.new_type = {**parent.new_type, **own}
            self.taken = parent.taken
            self.outer = _outer_refs(self.g)
        self.shaped = {tuple(n.output): n for n in shapes.node if subgraphs(n)} if shapes is not None else {}
        self.opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import}
        inputs = {i.name for i in self.g.input} | {s.values.name for s in self.g.sparse_initializer}
        self.weights_as_inputs = {t.name for t in self.g.initializer if t.name in inputs}
        self.inits = {t.name: t for t in self.g.initializer if t.name not in inputs}
        self.consts: dict[str, onnx.NodeProto] = {}
        self.versions: dict[str, dict[int, str]] = {n: {self._elem(n): n} for n in inputs}
        self.outputs = {o.name for o in self.g.output}
        self.nodes: list[onnx.NodeProto] = []
        self.extra_inits: list[onnx.TensorProto] = []

    def run(self) -> None:
        if self.io:
            self._io_inputs()
        for name in self.outputs & self.inits.keys():
            self._get(name, self._want(name))  # an initializer that is a graph output keeps its name
        for node in self.g.node:
            self._node(node)
        for vi in self.g.output:  # a subgraph output read from an outer scope: its version in the wanted type
            if vi.name in self.outer:
                vi.name = self._get(vi.name, self._want(vi.name))
        self.nodes += [n for out, n in self.consts.items() if out not in self.versions]  # unused: as they were
        del self.g.node[:]
        self.g.node.extend(self.nodes)
        inits = [self.inits.get(t.name, t) for t in self.g.initializer] + self.extra_inits
        del self.g.initializer[:]
        self.g.initializer.extend(inits)
        if self.parent is None:
            del self.g.value_info[:]  # stale types: shape inference redoes them from the inputs down
        else:
            self._value_info()
        if self.io:
            self._io_outputs()

    def _value_info(self) -> None:
        """A subgraph's values, each typed as it is now with the shape onnx's inference (or the model) gave it:
        dropped, they leave an importer that does not infer shapes inside branches every value of unknown shape,
        which it then compiles for any shape."""
        declared = {o.name for o in self.g.output}
        infos = []
        for name in dict.fromkeys(o for n in self.nodes for o in n.output if o and o not in declared):
            tp = self.new_type.get(name)
            if tp is not None and tp.WhichOneof("value") is not None:
                infos.append(helper.make_value_info(name, tp))
        del self.g.value_info[:]
        self.g.value_info.extend(infos)

    def _io_inputs(self) -> None:
        """Float graph inputs declared in the compute type; weights listed as inputs (IR 3) stored in it."""
        for vi in self.g.input:
            seq = vi.type.sequence_type.elem_type if vi.type.HasField("sequence_type") else None
            if seq is not None and seq.HasField("tensor_type") and seq.tensor_type.elem_type in FLOATS:
                seq.tensor_type.elem_type = self.low  # a sequence of float tensors: of `low` ones
                self.new_type[vi.name] = vi.type
            if self._elem(vi.name) not in FLOATS:  # declared, or inferred for a Loop body's untyped input
                continue
            self.versions[vi.name] = {self.low: vi.name}
            self.new_type[vi.name] = _with_elem(self.orig[vi.name], self.low)
            if vi.type.HasField("tensor_type"):
                vi.type.tensor_type.elem_type = self.low
        for t in self.g.initializer:
            if t.name in self.weights_as_inputs and t.data_type in FLOATS and t.data_type != self.low:
                t.CopyFrom(_round(numpy_helper.to_array(t), self.low, t.name))

    def _io_outputs(self) -> None:
        """Graph outputs declared as computed: float tensors in the compute type, sequences as they came out."""
        for vi in self.g.output:
            tp = self.new_type.get(vi.name)
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in FLOATS:
                vi.type.tensor_type.elem_type = self.low
            elif tp is not None and tp.WhichOneof("value") == vi.type.WhichOneof("value") != "tensor_type":
                vi.type.CopyFrom(tp)

    def _want(self, name: str) -> int:
        """The type a graph output is declared in: its own, or the compute type in a cast graph."""
        e = self._elem(name)
        return self.low if self.io and e in FLOATS else e

    def _elem(self, name: str) -> int:
        tp = self.orig.get(name)
        return tp.tensor_type.elem_type if tp is not None and tp.HasField("tensor_type") else 0

    def _fresh(self, base: str) -> str:
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.taken.add(name)
        return name

    def _node(self, node: onnx.NodeProto) -> None:
        if is_float_constant(node):
            self.consts[node.output[0]] = node
            if node.output[0] not in self.orig:
                self.orig[node.output[0]] = helper.make_tensor_type_proto(_const_type(node), None)
            if node.output[0] in self.outputs:
                self._get(node.output[0], self._want(node.output[0]))
            return
        self._fill_orig(node)
        if subgraphs(node) and node.domain in STANDARD and (self.io or self._descends(node)):
            new, in_types, out_types = self._cast_subgraphs(node)
        else:
            t = self._compute_type(node)
            planned = self._plan(node, t) if t else None
            new, in_types, out_types = planned if planned else self._as_is(node)
        for i, e in in_types.items():
            new.input[i] = self._get(new.input[i], e)
        self._emit(new, out_types)

    def _descends(self, node: onnx.NodeProto) -> bool:
        """Whether to_mixed computes a node's subgraphs in `low`: not when kept, nor when the node passes sequences
        or optionals (which to_mixed leaves in the model's own types, and which its subgraphs would then disagree
        with)."""
        if node.name in self.keep:
            return False
        values = [self.orig.get(n) for n in [*node.input, *node.output] if n]
        values += [vi.type for g in subgraphs(node) for vi in [*g.input, *g.output]]
        return all(tp is None or tp.WhichOneof("value") in (None, "tensor_type") for tp in values)

    def _fill_orig(self, node: onnx.NodeProto) -> None:
        """The model's own types of a node's outputs where neither shape inference nor a value_info says them (a
        graph with an op onnx does not know), from the op's type inference on its inputs' own types."""
        missing = [o for o in node.output if o and o not in self.orig]
        if not missing:
            return
        if subgraphs(node):
            for o, tp in zip(node.output, _subgraph_out_types(node)):
                if o and tp is not None and o not in self.orig:
                    self.orig[o] = self.new_type[o] = tp
            return
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opsets.get(node.domain or "", 1), node.domain)
        except onnx.defs.SchemaError:
            return
        ins = {n: self.orig[n] for n in node.input if n and n in self.orig}
        out = self._infer(schema, node, ins) or {}
        for o in missing:
            if o in out:
                self.orig[o] = self.new_type[o] = out[o]

    def _cast_subgraphs(self, node: onnx.NodeProto):
        """If, Loop, Scan computing in the compute type: float inputs and subgraph outputs in it, each node inside
        typed as its schema allows (Conv stays float32 in a bfloat16 branch before opset 22, as at the top); the
        outer names a subgraph reads come in the type its node there computes in."""
        new = onnx.NodeProto()
        new.CopyFrom(node)
        floats = {i: self.low for i, n in enumerate(node.input) if n and self._elem(n) in FLOATS}
        shaped = self.shaped.get(tuple(node.output))
        shaped_subs = subgraphs(shaped) if shaped is not None else []
        for k, sub in enumerate(subgraphs(new)):
            shapes = shaped_subs[k] if k < len(shaped_subs) else None
            _Mixer(self.m, self.low, set(), io=True, graph=sub, parent=self, shapes=shapes).run()
        outs = {}
        for o, tp in zip(new.output, _subgraph_out_types(new)):
            if o and tp is not None:
                outs[o] = tp
        for o in new.output:  # an untyped subgraph output: a float one came out in the compute type
            if o and o not in outs and self._elem(o) in FLOATS:
                outs[o] = _with_elem(self.orig[o], self.low)
        return new, floats, outs

    def _compute_type(self, node: onnx.NodeProto) -> int | None:
        """None: the node keeps the model's own types (subgraphs, other domains)."""
        if node.domain not in STANDARD or any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
            return None
        return HIGH if node.name in self.keep else self.low

    def _plan(self, node: onnx.NodeProto, t: int):
        """The node computing in `t`: its new form, the types of its float inputs (by index) and of its outputs;
        None when the op's schema refuses those types (the node then keeps the model's types)."""
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opsets.get("", 1), "")
        except onnx.defs.SchemaError:
            return None
        new = onnx.NodeProto()
        new.CopyFrom(node)
        _set_float_attrs(new, t)
        if self.io and node.op_type == "SequenceEmpty" and not any(a.name == "dtype" for a in new.attribute):
            new.attribute.append(helper.make_attribute("dtype", t))  # its default, float32, is not the graph's
        floats, in_types = {}, {}
        for i, name in enumerate(node.input):
            if not name:
                continue
            e = self._elem(name)
            if e in FLOATS:
                allowed = _allowed(schema, i)
                e = t if allowed and TYPE_STR[t] in allowed and (node.op_type, i) not in KEEP_TYPE else e
                floats[i] = e
                in_types[name] = _with_elem(self.orig[name], e)
            elif name in self.new_type:
                in_types[name] = self.new_type[name]
            else:
                return None  # an input of unknown type: nothing to check the plan against
        out = self._infer(schema, new, in_types)
        if out is None or any(o and o not in out for o in new.output):
            return None
        return new, floats, {o: out[o] for o in new.output if o}

    def _infer(self, schema: OpSchema, node: onnx.NodeProto, in_types: dict) -> dict | None:
        try:
            return onnx.shape_inference.infer_node_outputs(
                schema, node, in_types, opset_imports=list(self.m.opset_import), ir_version=self.m.ir_version)
        except Exception:  # onnx raises InferenceError, ValidationError or RuntimeError for a type mismatch
            return None

    def _as_is(self, node: onnx.NodeProto):
        """The node in the model's own types; outer-scope names its subgraphs read are renamed to those."""
        new = onnx.NodeProto()
        new.CopyFrom(node)
        floats = {i: self._elem(n) for i, n in enumerate(node.input) if n and self._elem(n) in FLOATS}
        for sub in subgraphs(new):
            for name in _outer_refs(sub):
                if self._elem(name) in FLOATS:
                    _rename(sub, name, self._get(name, self._elem(name)))
        return new, floats, {o: self.orig[o] for o in node.output if o in self.orig}

    def _emit(self, node: onnx.NodeProto, out_types: dict) -> None:
        """Append the node; a graph output computed in another type is renamed and cast back to its own."""
        back = []
        for j, out in enumerate(node.output):
            tp = out_types.get(out)
            if not out or tp is None:
                continue
            self.new_type[out] = tp
            e = tp.tensor_type.elem_type if tp.HasField("tensor_type") else 0
            if e not in FLOATS:
                continue
            want = self._want(out)
            if out in self.outputs and want in FLOATS and e != want:
                node.output[j] = self._fresh(f"{out}__{SHORT[e]}")
                back.append(helper.make_node("Cast", [node.output[j]], [out], self._fresh(f"{out}__cast_back"),
                                             to=want))
                self.versions[out] = {e: node.output[j], want: out}
            else:
                self.versions[out] = {e: out}
        self.nodes += [node] + back

    def _get(self, name: str, t: int) -> str:
        """The name of `name` in type `t`: the tensor itself, a stored copy, or a new Cast of it (an outer name's
        from the scope that has it, so one Cast serves every branch and the node reading it)."""
        have = self.versions.get(name)
        if have is None and name in self.outer and self.parent is not None:
            return self.parent._get(name, t)
        if have is None and (name in self.inits or name in self.consts):
            return self._store(name, t, name)  # first use: keeps its name
        if have is None:
            return name  # unknown provenance: left as it is
        if t not in have:
            if name in self.inits or name in self.consts:
                self._store(name, t, self._fresh(f"{name}__{SHORT[t]}"))
            else:
                src = next(iter(have.values()))  # as produced, never a rounded copy
                out = self._fresh(f"{name}__{SHORT[t]}")
                self.nodes.append(helper.make_node("Cast", [src], [out], self._fresh(f"{out}__cast"), to=t))
                have[t] = out
                self._typed(name, out, t)
        return have[t]

    def _typed(self, name: str, version: str, t: int) -> None:
        """Record the type of a version made here (a subgraph reading it from this scope must know it)."""
        if name in self.orig and self.orig[name].HasField("tensor_type"):
            self.new_type[version] = _with_elem(self.orig[name], t)

    def _store(self, name: str, t: int, new_name: str) -> str:
        """An initializer or Constant in type `t` under `new_name`, rounded once from the original value."""
        self.versions.setdefault(name, {})[t] = new_name
        self._typed(name, new_name, t)
        if name in self.inits:
            old = self.inits[name]
            tensor = old if t == old.data_type else _round(self._clamped(numpy_helper.to_array(old), t), t, new_name)
            if new_name == name:
                self.inits[name] = tensor
            else:
                self.extra_inits.append(_renamed(tensor, new_name))
            return new_name
        node = self.consts[name]
        if t != self._elem(name) or new_name != name:
            value = _round(self._clamped(const_value(node), t), t, new_name)
            node_name = node.name if new_name == name else self._fresh(f"{node.name or 'Constant'}__{SHORT[t]}")
            node = helper.make_node("Constant", [], [new_name], node_name, value=value)
        self.nodes.append(node)
        return new_name

    def _clamped(self, arr: np.ndarray, t: int) -> np.ndarray:
        """A stored value as `t` will hold it: moved into its range when clamping and read in a low type (a
        float32 reader gets the model's own value, so every op kept gives the model's own numbers)."""
        return clamp_into(arr, t) if self.clamp and t in LOWS else arr


def _known_types(g: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """Copies: a cast rewrites the graph's own declarations, and these must stay the model's own types."""
    types = {t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        if vi.type.WhichOneof("value") is not None:
            tp = onnx.TypeProto()
            tp.CopyFrom(vi.type)
            types[vi.name] = tp
    return types


def _subgraph_out_types(node: onnx.NodeProto) -> list:
    """The types an If/Loop/Scan node's outputs take from its subgraph's declared outputs (elem types: a scan
    output's shape gains a dim, so shapes are left out)."""
    subs = subgraphs(node)
    if not subs:
        return []
    body = list(subs[0].output)
    if node.op_type == "Loop":
        body = body[1:]  # the condition
    out = []
    for vi in body:
        if vi.type.HasField("tensor_type"):
            out.append(helper.make_tensor_type_proto(vi.type.tensor_type.elem_type, None))
        elif vi.type.WhichOneof("value") is not None:
            out.append(vi.type)
        else:
            out.append(None)
    return out


def _all_names(g: onnx.GraphProto) -> set[str]:
    names = {i.name for i in g.input} | {t.name for t in g.initializer} | {o.name for o in g.output}
    for n in g.node:
        names |= {n.name, *n.input, *n.output}
        for sub in subgraphs(n):
            names |= _all_names(sub)
    return names


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs a node holds (If's branches, Loop's and Scan's bodies)."""
    return [g for a in node.attribute for g in ([a.g] if a.type == a.GRAPH else a.graphs)]


def reads(node: onnx.NodeProto) -> list[str]:
    """Every value a node reads: its inputs, and the outer names its subgraphs read (an If branch's implicit
    inputs), so a graph cut around the node keeps what its branches use."""
    implicit = sorted({r for sub in subgraphs(node) for r in _outer_refs(sub)})
    return [i for i in node.input if i] + [r for r in implicit if r not in node.input]


def _outer_refs(g: onnx.GraphProto) -> set[str]:
    """Names a subgraph (or its own subgraphs) reads from enclosing scopes."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer} | {o for n in g.node for o in n.output}
    used = {i for n in g.node for i in n.input if i} | {o.name for o in g.output}
    for n in g.node:
        for sub in subgraphs(n):
            used |= _outer_refs(sub)
    return used - defined


def _rename(g: onnx.GraphProto, old: str, new: str) -> None:
    if old == new:
        return
    for n in g.node:
        n.input[:] = [new if i == old else i for i in n.input]
        for sub in subgraphs(n):
            _rename(sub, old, new)
    for o in g.output:
        if o.name == old:
            o.name = new


def _allowed(schema: OpSchema, i: int) -> set[str] | None:
    formals = schema.inputs
    if i < len(formals):
        f = formals[i]
    elif formals and formals[-1].option == OpSchema.FormalParameterOption.Variadic:
        f = formals[-1]
    else:
        return None
    for c in schema.type_constraints:
        if c.type_param_str == f.type_str:
            return set(c.allowed_type_strs)
    return {f.type_str}


def _with_elem(tp: onnx.TypeProto, elem: int) -> onnx.TypeProto:
    new = onnx.TypeProto()
    new.CopyFrom(tp)
    new.tensor_type.elem_type = elem
    return new


def _set_float_attrs(node: onnx.NodeProto, t: int) -> None:
    """Output-type attributes and float tensor attributes (ConstantOfShape's value) in `t`."""
    for a in node.attribute:
        if a.name in DTYPE_ATTRS and a.type == a.INT and a.i in FLOATS:
            a.i = t
        elif a.type == a.TENSOR and a.t.data_type in FLOATS and a.t.data_type != t:
            a.t.CopyFrom(_round(numpy_helper.to_array(a.t), t, a.t.name))


def is_float_constant(node: onnx.NodeProto) -> bool:
    if node.op_type != "Constant" or node.domain not in STANDARD or len(node.attribute) != 1:
        return False
    a = node.attribute[0]
    return a.name in ("value_float", "value_floats") or (a.name == "value" and a.t.data_type in FLOATS)


def _const_type(node: onnx.NodeProto) -> int:
    a = node.attribute[0]
    return a.t.data_type if a.name == "value" else TensorProto.FLOAT


def const_value(node: onnx.NodeProto) -> np.ndarray:
    """The value a float Constant node holds, whichever attribute holds it."""
    a = node.attribute[0]
    if a.name == "value":
        return numpy_helper.to_array(a.t)
    return np.array(a.f if a.name == "value_float" else list(a.floats), dtype=np.float32)


def _round(arr: np.ndarray, t: int, name: str) -> onnx.TensorProto:
    """Rounded once to `t`, no clamping: what overflows becomes inf, what is too small flushes."""
    with np.errstate(over="ignore", under="ignore"):
        return numpy_helper.from_array(np_cast(arr, t), name)


def _renamed(tensor: onnx.TensorProto, name: str) -> onnx.TensorProto:
    new = onnx.TensorProto()
    new.CopyFrom(tensor)
    new.name = name
    return new


def named(model):
    """A copy whose every node has a unique name (plans and block lists name nodes)."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    seen: set[str] = set()
    for i, n in enumerate(m.graph.node):
        if not n.name or n.name in seen:
            n.name = f"{n.op_type}_{i}"
        seen.add(n.name)
    return m
