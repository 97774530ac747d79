"""The plan as ONNX graphs: `onnx` (fp32 in and out, Casts at the plan's borders: the graph the trials ran) and
`onnx-typed` (the precision's dtype in and out, every value typed: TensorRT's strongly typed networks)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fpdiff.analysis.plan.exports import Context, ExportTarget, run, scratch
from fpdiff.analysis.plan.search import Export
from fpdiff.backends.base import ONNX
from fpdiff.core import precision as prec


def _onnx(ctx: Context, out: Path, e: Export) -> None:
    """The plan's ONNX graph as the trials ran it, verified on the plan's backend when it runs ONNX graphs, else on
    the backend that cross-checks ONNX models."""
    import onnx

    from fpdiff.onnxtools.graph import graph_inputs
    ctx.trials.export_onnx(ctx.keep, out)
    e.written = True
    model = onnx.load(str(out))
    e.op_dtypes = onnx_op_dtypes(model)
    verifier = (ctx.trials.backend if ONNX in ctx.reg.cls(ctx.trials.backend).kinds
                else ctx.reg.cross_check_for(ONNX))
    if verifier is None:
        e.reason = "not verified: no backend here runs ONNX graphs"
        return
    run(ctx, e, verifier, scratch(ctx, out), graph_inputs(model), prec.FP32)


def onnx_op_dtypes(model) -> dict[str, int]:
    """The graph's arithmetic nodes (moves and Casts aside) by the float dtype they compute in: float32 when one
    input is float32, else the low dtype of their inputs."""
    from onnx import TensorProto

    from fpdiff.onnxtools.graph import DATA_MOVEMENT, value_types
    names = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16",
             TensorProto.DOUBLE: "float64"}
    types = value_types(model)
    counts: dict[str, int] = {}
    for n in model.graph.node:
        if n.op_type in DATA_MOVEMENT:
            continue
        ins = {types.get(i) for i in n.input if i} & set(names)
        wide = next((t for t in (TensorProto.DOUBLE, TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)
                     if t in ins), None)
        if wide is not None:
            counts[names[wide]] = counts.get(names[wide], 0) + 1
    return counts



def _onnx_typed(ctx: Context, out: Path, e: Export) -> None:
    """The plan's graph taking and giving the precision's dtype, Casts around the kept ops, every value's type in
    the graph (value_info): TensorRT's strongly typed mode builds what the graph says. Verified where that dtype is
    really computed: the judge of ONNX models (the reference evaluator: numpy computing each node in the graph's own
    dtypes, fp16 elementwise ops rounded per op, MatMul/Conv/reductions once after a float32 sum as GPU kernels do),
    fed the inputs in that dtype. ONNX Runtime's CPU provider is no judge of it: it runs fp16 nodes in fp32."""
    import onnx

    from fpdiff.onnxtools.export import ONNX_TYPE
    from fpdiff.onnxtools.graph import graph_inputs
    plain = ctx.jobs.path("plan", ".onnx")
    ctx.trials.export_onnx(ctx.keep, plain)
    low = ONNX_TYPE[prec.dtype_name(ctx.p.dtype)]
    onnx.save(typed_onnx(onnx.load(str(plain)), low), str(out))
    e.written = True
    back = onnx.load(str(out))
    e.op_dtypes = onnx_op_dtypes(back)
    untyped = untyped_values(back)
    wide = [v.name for v in [*back.graph.input, *back.graph.output] if v.type.tensor_type.elem_type ==
            onnx.TensorProto.FLOAT]
    e.check = (f"every value typed ({len(back.graph.value_info)} in value_info), inputs and outputs "
               f"{prec.dtype_name(ctx.p.dtype)}")
    if untyped or wide:
        e.check = "; ".join(([f"{len(untyped)} values untyped ({', '.join(untyped[:5])})"] if untyped else [])
                            + ([f"float32 inputs or outputs ({', '.join(wide[:5])})"] if wide else []))
        e.reason = f"not a strongly typed graph: {e.check}"
        return
    run(ctx, e, ctx.reg.judge_for(ONNX), scratch(ctx, out), graph_inputs(back), ctx.p)


def typed_onnx(model, low: int):
    """A copy of a plan's graph (float32 in and out, Casts at the plan's borders) whose float32 inputs and outputs
    are `low`, the Casts that only converted them dropped (a low input cast to fp32 and back is the input itself),
    and every value's type inferred into value_info (strict: a graph whose types do not check raises)."""
    import onnx

    from fpdiff.onnxtools.graph import value_types
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {t.name for t in g.initializer}
    types = value_types(model)  # the plan's graph's own types: a Cast's input type is read from them
    for vi in g.input:
        if vi.name not in inits and vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            _low_input(g, vi.name, low)
            vi.type.tensor_type.elem_type = low
    for vo in g.output:
        if vo.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            _low_output(g, vo.name, low, types)
            vo.type.tensor_type.elem_type = low
    del g.value_info[:]  # written again below, for the graph as it now is
    m = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    onnx.checker.check_model(m, full_check=True)
    return m


def _rename(g, old: str, new: str) -> None:
    """Every read of `old` (nodes, their subgraphs, the graph's outputs) made a read of `new`."""
    for n in g.node:
        n.input[:] = [new if i == old else i for i in n.input]
        for a in n.attribute:
            for sub in [a.g] if a.type == a.GRAPH else a.graphs:
                _rename(sub, old, new)
    for o in g.output:
        if o.name == old:
            o.name = new


def _cast_to(node) -> int | None:
    if node.op_type != "Cast":
        return None
    return next((a.i for a in node.attribute if a.name == "to"), None)


def _low_input(g, name: str, low: int) -> None:
    """A graph input made `low`: its readers that cast it to `low` read it as it is; the others read it cast to
    float32, as the plan's graph had it."""
    import onnx
    outputs = {o.name for o in g.output}
    wide = None
    for n in [n for n in g.node if name in n.input]:
        if _cast_to(n) == low and n.output[0] not in outputs:
            g.node.remove(n)
            _rename(g, n.output[0], name)
            continue
        if wide is None:
            wide = f"{name}_float32"
            g.node.insert(0, onnx.helper.make_node("Cast", [name], [wide], to=onnx.TensorProto.FLOAT,
                                                   name=f"{name}_to_float32"))
        n.input[:] = [wide if i == name else i for i in n.input]


def _low_output(g, name: str, low: int, types: Mapping[str, int]) -> None:
    """A graph output made `low`: a Cast to float32 of a `low` value that made it is dropped (its value is the
    output); else the output is the float32 value cast to `low`. An output no node makes (a graph input passed
    through) stays as it is, and the read-back check says so."""
    import onnx
    maker = next((n for n in g.node if name in n.output), None)
    if maker is None:
        return
    if maker is not None and _cast_to(maker) == onnx.TensorProto.FLOAT and types.get(maker.input[0]) == low:
        src = maker.input[0]
        producer = next((n for n in g.node if src in n.output), None)
        if producer is not None and src not in {o.name for o in g.output}:
            g.node.remove(maker)
            producer.output[:] = [name if o == src else o for o in producer.output]
            _rename(g, src, name)
            return
    inner = f"{name}_float32"
    for n in g.node:
        n.output[:] = [inner if o == name else o for o in n.output]
        n.input[:] = [inner if i == name else i for i in n.input]
    g.node.append(onnx.helper.make_node("Cast", [inner], [name], to=low, name=f"{name}_to_low"))


def untyped_values(model) -> list[str]:
    """Values the graph gives no element type: every node output must have one in a strongly typed graph."""
    g = model.graph
    typed = {v.name for v in [*g.value_info, *g.input, *g.output] if _typed(v.type)}
    typed |= {t.name for t in g.initializer}
    return [o for n in g.node for o in n.output if o and o not in typed]


def _typed(tp) -> bool:
    """A value type whose element type is known: a tensor's, or a sequence's or optional's element's."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return tp.tensor_type.elem_type != 0
    if kind in ("sequence_type", "optional_type"):
        return _typed(getattr(tp, kind).elem_type)
    return kind is not None


ONNX_GRAPH = ExportTarget("onnx", ".onnx", _onnx, "fp32 in and out, Casts at the plan's borders")
ONNX_TYPED = ExportTarget("onnx-typed", ".onnx", _onnx_typed, "the precision's dtype in and out, every value typed")
