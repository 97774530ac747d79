"""Where a format cannot hold a model's numbers: every float64 intermediate, composite ops opened, per dtype."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from fpdiff.analysis.base import Result
from fpdiff.analysis.options import RunOptions
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.precision import Precision
from fpdiff.model import graph
from fpdiff.model.mixed import MOVES, op_name
from fpdiff.model.weights import stored
from fpdiff.runtime import rundir
from fpdiff.sources import load

# Rules, each with its reason (the README repeats them). u is the format's unit roundoff.
#  risk   overflow: any value beyond the format's max becomes inf, and inf spreads (NaN after inf-inf or 0*inf).
#  risk   rounding: rounding the exact values to the format loses more than RISK_ROUNDING x u (relative L2). A
#         value held as a normal number loses at most u, so this only fires when the tensor's mass sits in the
#         subnormal or flushed range: the op's result is mostly noise in that format.
#  risk   constant: a scalar argument or weight that becomes 0 or inf, or moves by more than RISK_ROUNDING x u
#         (an eps of 1e-8 is 0 in fp16; an exported graph stores it in the format).
#  note   flush: at least FLUSH_NOTE of the nonzero values become 0; harmless when they are tiny against the
#         rest, harmful when a later op divides by them or takes their log or rsqrt.
#  note   headroom: max |x| within HEADROOM x of the format's max: inputs a few times larger overflow.
#  note   reduction: more than 1/(2u) terms summed per output (fp16: 1024, bf16: 128); the worst-case error bound
#         of accumulating in the format reaches 1/2. torch's CPU kernels and most GPU matmuls accumulate in fp32,
#         so this only bites on a backend that accumulates in the format itself.
#  keep   (plan, overflows()): an op that reads or makes a finite value beyond the format's max computes wider: the
#         value is inf in the format, and a backend that computes the format wider (ORT's CPU provider) hides it.
RISK_ROUNDING = 8.0  # the same factor as locate's: a correct op at P lands within a few u
FLUSH_NOTE = 0.01
HEADROOM = 4.0
LOW_FORMATS = (prec.FP16, prec.BF16)  # the formats ranges judges: the two 16-bit whole-model casts

# Ops whose outputs hold nothing their inputs did not: mixed.MOVES (one input moved), plus ops that regroup or
# pick several inputs' values; getitem is measured (it carries var_mean's and batch norm's separate outputs).
_MOVES = (MOVES - {"getitem", "dropout"}) | {
    "cat", "stack", "_to_copy", "copy", "expand_copy", "view_copy", "permute_copy", "squeeze_copy", "unsqueeze_copy",
    "index_select", "constant_pad_nd", "roll", "diagonal", "broadcast_in_dim", "collapse_view", "split_dim",
    "select_scatter", "slice_scatter"}
# Ops that sum terms per output: the reduced elements (sum-like) or the contraction length (matmul-like).
_SUMS = {"sum", "mean", "var", "var_mean", "std", "std_mean", "prod", "cumsum", "logsumexp", "nansum"}
_CONTRACTIONS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "convolution", "linear", "dot", "mv", "addmv"}

# Composite ops opened so their insides (sum of squares, exp, variance) are measured, on top of core ATen's.
_A = torch.ops.aten
_OPEN = [_A._softmax, _A._log_softmax, _A.softmax, _A.log_softmax, _A.native_layer_norm, _A.layer_norm,
         _A.native_group_norm, _A.group_norm, _A.var_mean, _A.var, _A.std, _A.logsumexp, _A.gelu, _A._safe_softmax,
         _A.scaled_dot_product_attention, _A._scaled_dot_product_flash_attention_for_cpu, _A.rms_norm, _A.linear,
         _A.silu, _A.mish, _A.softplus, _A.hardswish, _A.norm, _A.linalg_vector_norm, _A.cosine_similarity,
         _A.instance_norm]


@dataclass
class DtypeRange:
    """One op's values as one low-precision format would hold them."""
    overflow: float  # share of finite values that become inf
    flushed: float  # share of nonzero values that become 0
    subnormal: float  # share of nonzero values held as subnormals
    rounding: float  # relative L2 of rounding the finite values to the format
    risks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class OpRange:
    index: int
    node: str
    op: str
    part_of: str  # the op of the exported graph this one was decomposed from ("" when not decomposed)
    origin: str  # that op's node name in the exported graph (the unit `plan` keeps in fp32)
    module: str
    source: str
    numel: int
    max_abs: float
    min_abs: float  # smallest nonzero |x| (inf when all zero)
    depth: int | None  # terms summed per output, for reductions and contractions
    dtypes: dict[str, DtypeRange] = field(default_factory=dict)

    def risky(self, dtype: str) -> bool:
        return bool(self.dtypes[dtype].risks)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["dtypes"] = {k: dict(v.__dict__) for k, v in self.dtypes.items()}
        d["min_abs"] = self.min_abs if math.isfinite(self.min_abs) else None
        return d


@dataclass
class ConstantRange:
    name: str  # the weight's name, or the node and argument position of a scalar
    kind: str  # "weight" or "scalar"
    used_by: list[str]  # exported-graph node names (origins) that use it
    value: float  # the scalar, or a weight's max |w|
    dtypes: dict[str, list[str]] = field(default_factory=dict)  # dtype -> reasons it does not survive

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RangesResult(Result):
    kind: ClassVar[str] = "ranges"
    model: str
    dtypes: list[str]
    ops: list[OpRange] = field(default_factory=list)
    constants: list[ConstantRange] = field(default_factory=list)

    def risky(self, dtype: str) -> list[OpRange]:
        return [o for o in self.ops if o.dtypes[dtype].risks]

    def noted(self, dtype: str) -> list[OpRange]:
        return [o for o in self.ops if o.dtypes[dtype].notes and not o.dtypes[dtype].risks]

    def origins(self, dtype: str) -> dict[str, list[str]]:
        """Exported-graph node -> the reasons (risks first) found on it or inside it, for `plan`'s seeds."""
        out: dict[str, list[str]] = {}
        for o in self.ops:
            r = o.dtypes[dtype]
            if r.risks:
                out.setdefault(o.origin, []).extend(f"{o.op}: {x}" for x in r.risks)
        for c in self.constants:
            for u in c.used_by:
                if c.dtypes.get(dtype):
                    out.setdefault(u, []).extend(f"constant {c.name}: {x}" for x in c.dtypes[dtype])
        return out

    def exit_code(self, strict: bool = False) -> int:
        """0: ranges informs; plan and check decide."""
        return 0

    def as_dict(self) -> dict:
        return {"kind": self.kind, "model": self.model, "dtypes": self.dtypes, "ops": [o.as_dict() for o in self.ops],
                "constants": [c.as_dict() for c in self.constants],
                "risky": {d: [o.node for o in self.risky(d)] for d in self.dtypes}}


def _g(x: float) -> str:
    return f"{x:.3g}"


# Elements per pass of dtype_range: a real-size model's embedding (65M values) is judged 4M at a time, so its float64
# value, its rounding and their masks never exist whole at once (several copies of it were gigabytes).
RANGE_CHUNK = 1 << 22


def dtype_range(x: torch.Tensor, dt: torch.dtype, tag: str, depth: int | None) -> DtypeRange:
    fi = torch.finfo(dt)
    u = float(fi.eps) / 2
    flat = x.reshape(-1)
    over = count = nz = flushed = sub = 0
    nums, dens, mx = [], [], 0.0
    for i in range(0, flat.numel(), RANGE_CHUNK):
        c = flat[i:i + RANGE_CHUNK].double()
        finite = c[torch.isfinite(c)]
        a = finite.abs()
        r = finite.to(dt)
        over += int(torch.isinf(r).sum())
        count += a.numel()
        nonzero = a > 0
        nz += int(nonzero.sum())
        zeroed = int(((r == 0) & nonzero).sum())
        flushed += zeroed
        sub += int(((a < fi.smallest_normal) & nonzero).sum()) - zeroed
        kept = ~torch.isinf(r)
        nums.append(float(torch.linalg.vector_norm(r[kept].double() - finite[kept])))
        dens.append(float(torch.linalg.vector_norm(finite[kept])))
        mx = max(mx, float(a.max()) if a.numel() else 0.0)
    n, nz = max(count, 1), max(nz, 1)
    num, den = math.hypot(*nums), math.hypot(*dens)  # one chunk: its norms as they are
    rounding = num / den if den > 0 else 0.0
    dr = DtypeRange(over / n, flushed / nz, sub / nz, rounding)
    if over:
        dr.risks.append(f"{dr.overflow:.1%} of values overflow {tag} (max |x| {_g(mx)} > {_g(fi.max)})")
    if rounding > RISK_ROUNDING * u:
        dr.risks.append(f"rounding to {tag} alone loses {_g(rounding)} relative ({dr.subnormal:.0%} subnormal, "
                        f"{dr.flushed:.0%} flushed to 0; {tag} holds normals to {_g(u)})")
    if dr.flushed >= FLUSH_NOTE and not dr.risks:
        dr.notes.append(f"{dr.flushed:.1%} of nonzero values flush to 0 in {tag} (|x| < {_g(float(fi.tiny) * u)})")
    if not over and mx * HEADROOM > fi.max:
        dr.notes.append(f"max |x| {_g(mx)} is within {HEADROOM:g}x of {tag}'s max {_g(fi.max)}")
    if depth and depth > 1 / (2 * u):
        dr.notes.append(f"sums {depth} terms per output: accumulated in {tag} the error bound is {_g(depth * u)}")
    return dr


def _depth(node, args) -> int | None:
    name = op_name(node.target)
    val = node.meta.get("val")
    if name in _SUMS and args and isinstance(args[0], torch.Tensor):
        out = val[0] if isinstance(val, (tuple, list)) else val
        if name == "cumsum":
            return int(args[0].shape[args[1]]) if len(args) > 1 else None
        return max(args[0].numel() // max(out.numel(), 1), 1) if isinstance(out, torch.Tensor) else None
    if name in _CONTRACTIONS:
        if name == "convolution":
            w = args[1]
            return int(w.shape[1] * math.prod(w.shape[2:]))
        a = args[1] if name in ("addmm", "baddbmm", "addmv") else args[0]
        return int(a.shape[-1]) if isinstance(a, torch.Tensor) and a.dim() else None
    return None


def scalar_reasons(v: float, formats: Sequence[Precision]) -> dict[str, list[str]]:
    out = {}
    for p in formats:
        tag, dt = p.name, p.compute
        c = float(torch.tensor(v, dtype=torch.float64).to(dt))
        u = float(torch.finfo(dt).eps) / 2
        if v != 0 and c == 0:
            out[tag] = [f"{_g(v)} is 0 in {tag} (as an exported graph stores it)"]
        elif math.isfinite(v) and math.isinf(c):
            out[tag] = [f"{_g(v)} is {'-' if c < 0 else ''}inf in {tag}"]
        elif v != 0 and math.isfinite(v) and abs(c - v) / abs(v) > RISK_ROUNDING * u:
            out[tag] = [f"{_g(v)} becomes {_g(c)} in {tag} ({abs(c - v) / abs(v):.1%} off: subnormal)"]
    return out


def overflows(nodes: Iterable[tuple[str, Sequence[str], Sequence[str]]], values: Mapping[str, Any],
              p: Precision) -> dict[str, list[str]]:
    """Ops that must not compute in `p` (the keep rule above), from a float64 run's `values`: each reads a finite
    value `p` rounds to inf, or makes one. `nodes`: (op, its inputs, its outputs), named as in `values`."""
    tag, dt = p.name, p.compute
    seen: dict[str, float] = {}

    def beyond(name: str) -> float:
        if name not in seen:
            seen[name] = _beyond(values.get(name), dt)
        return seen[name]
    out = {}
    for node, ins, outs in nodes:
        why = [f"reads {i} up to {_g(beyond(i))} (inf in {tag})" for i in dict.fromkeys(ins) if i and beyond(i)]
        why += [f"makes {o} up to {_g(beyond(o))} (inf in {tag})" for o in outs if o and beyond(o)]
        if why:
            out[node] = why
    return out


def _beyond(v: Any, dt: torch.dtype) -> float:
    """The largest finite |x| of a float array when `dt` rounds it to inf, else 0 (an inf the array holds is one
    the format holds too: a -inf mask fill is no overflow)."""
    if not isinstance(v, np.ndarray) or v.dtype.kind != "f" or not v.size:
        return 0.0
    a = np.abs(v[np.isfinite(v)])
    m = float(a.max()) if a.size else 0.0
    return m if math.isinf(float(torch.tensor(m, dtype=torch.float64).to(dt))) else 0.0


def onnx_overflows(model: Any, feeds: Mapping[str, Any], values: Mapping[str, Any], p: Precision,
                   units: Sequence[str]) -> dict[str, list[str]]:
    """overflows() on an ONNX graph's `units`. Its small stored constants count as the format holds them: clamped
    into its range (plan's clamp-constants) or lost to inf or 0 (a -3.4e38 fill is -inf in fp16, as a -inf fill
    is); either way no finite value beyond the range, and what a lost constant does is the lost-constant evidence's
    to say. So the values are the float64 run's with those constants clamped: `values` when none moves, else a
    second run."""
    from onnx import numpy_helper

    from fpdiff.core.precision import dtype_name
    from fpdiff.onnxtools.dtypes import ONNX_TYPE
    from fpdiff.onnxtools.graph import float64_values
    clamped = _clamped(model, ONNX_TYPE[dtype_name(p.compute)])
    held = values
    if clamped is not None:  # the weights as stored: their magnitude is what a low-type reader gets
        held = {**float64_values(clamped, dict(feeds)),
                **{t.name: numpy_helper.to_array(t) for t in clamped.graph.initializer}}
    want = set(units)
    found = overflows([(n.name, n.input, n.output) for n in model.graph.node if n.name in want], held, p)
    return {n: [f"ranges: {w}" for w in why] for n, why in found.items()}


def _clamped(model: Any, low: int) -> Any:
    """A copy of an ONNX model with its small float constants moved into `low`'s range, or None when none moves."""
    import onnx
    from onnx import numpy_helper

    from fpdiff.onnxtools.dtypes import clamp_into
    from fpdiff.onnxtools.mixed import const_value, is_float_constant
    m = onnx.ModelProto()
    m.CopyFrom(model)
    moved = False
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        if (new := clamp_into(a, low)) is not a:
            t.CopyFrom(numpy_helper.from_array(new, t.name))
            moved = True
    for n in m.graph.node:
        if is_float_constant(n) and (new := clamp_into(a := const_value(n), low)) is not a:
            del n.attribute[:]
            n.attribute.append(onnx.helper.make_attribute("value", numpy_helper.from_array(new)))
            moved = True
    return m if moved else None


def _origin(node) -> tuple[str, str]:
    """The exported-graph node this decomposed node came from (the root of its provenance): name and op."""
    src = node.meta.get("from_node") or []
    root = None
    while src:
        root, src = src[0], src[0].from_node
    return (root.name, str(root.target)) if root is not None else (node.name, str(node.target))


class _Walk(torch.fx.Interpreter):
    """Runs the decomposed float64 program, measuring each op's output before the interpreter frees it."""

    def __init__(self, gm, formats: Sequence[Precision], result: RangesResult) -> None:
        super().__init__(gm)
        self.formats, self.result = formats, result

    def run_node(self, n):
        out = super().run_node(n)
        if n.op != "call_function":
            return out
        name = op_name(n.target)
        origin, part_of = _origin(n)
        args = [self.env[a] if isinstance(a, torch.fx.Node) else a for a in n.args]
        # named after the exported-graph op that holds it (the decomposed node's own name is renumbered)
        where = origin if part_of == str(n.target) else f"{origin} ({name} inside it)"
        for key, a in [*enumerate(n.args), *n.kwargs.items()]:
            if isinstance(a, float) and (reasons := scalar_reasons(a, self.formats)):
                label = f"argument {key}" if isinstance(key, int) else key
                self.result.constants.append(ConstantRange(f"{where} {label}", "scalar", [origin], a, reasons))
        if name in _MOVES or not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return out
        x = out.detach().double().reshape(-1)
        a = x[torch.isfinite(x)].abs()
        nz = a[a > 0]
        depth = _depth(n, args)
        module, source = graph.where(n)
        op = OpRange(len(self.result.ops), n.name, str(n.target), "" if origin == n.name else part_of,
                     origin, module, source, x.numel(), float(a.max()) if a.numel() else 0.0,
                     float(nz.min()) if nz.numel() else math.inf, depth)
        for p in self.formats:
            op.dtypes[p.name] = dtype_range(x, p.compute, p.name, depth)
        self.result.ops.append(op)
        return out


def decomposed(module: torch.nn.Module, inputs: tuple) -> torch.export.ExportedProgram:
    """The float64 program in core ATen, with the composite ops that hide intermediates opened as well; its weights
    are `module`'s own, cast to float64 as each op reads them (no float64 copy of the model: graph.lazy_export)."""
    args = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    return graph.lazy_export(module, args, torch.float64, then=_open)


def _open(ep: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """Core ATen plus the composite ops ranges opens."""
    from torch._decomp import core_aten_decompositions, get_decompositions
    table = core_aten_decompositions()
    table.update(get_decompositions(_OPEN))
    try:
        return ep.run_decompositions(table)
    except (RuntimeError, ValueError):
        # torch 2.13's core table can write a view of a transposed value (GPT-2's attention: "Cannot view a tensor
        # with shape [2, 16, 128] and strides (128, 256, 1)"): the composite ops alone still open what hides
        # intermediates; the other ops stay as exported, which ranges walks the same way
        return ep.run_decompositions(get_decompositions(_OPEN))


def _weights(ep: torch.export.ExportedProgram, formats: Sequence[Precision], result: RangesResult) -> None:
    """Weights and buffers whose values the format cannot hold (overflow, mass in subnormals, flushed)."""
    sig = ep.graph_signature
    by_input = {**sig.inputs_to_parameters, **sig.inputs_to_buffers, **sig.inputs_to_lifted_tensor_constants}
    state = {**ep.state_dict, **ep.constants}
    for n in ep.graph.nodes:
        if n.op != "placeholder" or n.name not in by_input:
            continue
        w = state.get(by_input[n.name])
        if not isinstance(w, torch.Tensor) or not w.is_floating_point() or w.numel() == 0:
            continue
        x = stored(w.detach()).reshape(-1)  # its stored values (the float64 cast of them is exact): judged by chunk
        users = sorted({_origin(u)[0] for u in n.users})
        reasons = {}
        for p in formats:
            dr = dtype_range(x, p.compute, p.name, None)
            if dr.risks:
                reasons[p.name] = dr.risks
        if reasons:
            big = max(abs(float(v)) for v in torch.aminmax(x))  # no |x| copy of the weight
            result.constants.append(ConstantRange(by_input[n.name], "weight", users, big, reasons))


@dataclass(frozen=True)
class RangesOptions:
    """ranges' own options: the low-precision formats to judge every intermediate for (a list, or a comma list)."""
    precisions: str | Sequence[str] = ("fp16", "bf16")


@rundir.scoped
def ranges(model: str, options: RangesOptions | None = None, shared: RunOptions | None = None) -> RangesResult:
    """Every intermediate of the float64 run of a torch model, judged for each low-precision format (of the shared
    options, only the seed and a checkpoint's task apply: ranges runs no backend)."""
    precisions, shared = (options or RangesOptions()).precisions, (shared or RunOptions()).checked()
    names = [p.strip() for p in (precisions.split(",") if isinstance(precisions, str) else precisions) if p.strip()]
    known = {p.name: p for p in LOW_FORMATS}
    bad = [p for p in names if p not in known]
    if bad or not names:
        raise UsageError(f"ranges judges low-precision formats: give --precision from {', '.join(known)}"
                         + (f" (not {', '.join(bad)})" if bad else ""))
    torch_only = UsageError("ranges opens composite ops through torch's decompositions: give a spec .py or "
                            "example:NAME (for an ONNX model, use its torch source; fpdiff plan reads an ONNX "
                            "model's ranges itself)")
    if str(model).lower().endswith(".onnx"):  # said before loading: an ONNX model's own input errors do not apply
        raise torch_only
    source = load(model, **shared.load_args())
    if source.ref.kind != "torch":
        raise torch_only
    return measure(source.module, source.inputs, [known[n] for n in names], source.ref.label)


def measure(module: torch.nn.Module, inputs: tuple, formats: Sequence[Precision], label: str = "") -> RangesResult:
    """ranges() on a module and its inputs (the module is left as it is: its weights are read at float64 op by op)."""
    result = RangesResult(label, [p.name for p in formats])
    ep = decomposed(module, inputs)
    _weights(ep, formats, result)
    args = tuple(t.double() if t.is_floating_point() else t for t in inputs)
    with torch.no_grad():
        _Walk(ep.module(), formats, result).run(*args)
    return result
