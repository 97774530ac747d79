"""Variants the catalogs lack, made on purpose. A catalog gives an op on the inputs its authors thought of; a backend
bug often lives in one variant only: a memory layout, a size around a vector width, a dynamic dim, an attribute
combination, a range of values, an integer path, one conv layout (SEEDS #3). Each generator here is one Variant:
`apply(case)` derives cases from a catalog case (or none), `extra()` builds purpose-made cases that need none.
`expand` and `extra_cases` are what the sweep calls; `--variants NAME,...` selects them by name."""
from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import numpy as np

from fpdiff.analysis.ops.case import (
    CHANNELS_LAST,
    CONTIGUOUS,
    ONNX_CATALOG,
    SAMPLE,
    TORCH_CATALOG,
    TRANSPOSED,
    Case,
    OnnxSample,
    TorchSample,
    matches,
)
from fpdiff.core.errors import UsageError

FP16_MAX = 65504.0
# near-max aims at half of fp16's max: inputs that large still leave room for an op's own output (a sum of two,
# a mean) while any intermediate a backend squares or exponentiates in fp16 overflows
NEAR_MAX = 0.5 * FP16_MAX
# fp16's subnormals run from 6e-8 (the smallest) to 6.1e-5 (the smallest normal); 1e-5..6e-8 sits inside them, where
# a backend that flushes subnormals to zero or computes in fp16 without gradual underflow loses every digit
TINY_RANGE = (6e-8, 1e-5)
# all-positive inputs: |x| plus an offset keeps log, sqrt, reciprocal and pow away from 0 (their poles)
POSITIVE_OFFSET = 0.01
# sizes around SIMD widths (8, 64, 128 lanes of a vector loop): the tail a vectorized kernel handles apart
ODD_SIZES = (7, 63, 65, 127)
# long reductions: fp16 stalls once a running sum reaches 2048 (its spacing there is 2, so adding a term < 1 is
# lost): 4096 terms of U(0,1) reach it, 16384 go well past it
LONG_TERMS = (4096, 16384)
OPSET = 21  # a current default-domain opset every ONNX backend here takes (Resize antialias needs 18, GridSample 20)

# cases of one op under one variant past this many elements are not made: a sweep of thousands of cells must stay
# small per cell, and a size bug shows at the tail, not at volume
MAX_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class Variant:
    """One generator: its name (what --variants takes), why it finds bugs, how it derives cases from a catalog
    case, and the purpose-built cases it adds. `per_op`: derive from the first case of each op it applies to only
    (the bug it looks for is the op's, not the sample's, and the sweep stays affordable)."""
    name: str
    doc: str
    derive: Callable[[Case, int], list[Case]] | None = None
    extra: Callable[[int], list[Case]] | None = None
    per_op: bool = False

    def apply(self, case: Case, seed: int = 0) -> list[Case]:
        """The cases this variant derives from `case` ([] when it does not apply)."""
        return [c for c in self.attempt(case, seed) if isinstance(c, Case)]

    def attempt(self, case: Case, seed: int = 0) -> list[Case | NotMade]:
        """apply's cases, with a NotMade for each one the variant applies to but cannot build (its reason)."""
        if self.derive is None or case.variant != SAMPLE:
            return []
        try:
            return list(self.derive(case, seed))
        except NotMade as e:
            return [e]


class NotMade(Exception):
    """A derived case the variant applies to but cannot build (an export that refuses its declared dims): a skip
    with this reason in the sweep's report, never a case every backend would fail alike."""

    def __init__(self, reason: str, case_id: str = "") -> None:
        super().__init__(reason)
        self.reason, self.case_id = reason, case_id


# ---------------------------------------------------------------------------------------------------------------
# shared helpers


def _quantized(seed: int) -> list[Case]:
    from fpdiff.analysis.ops.quantized_cases import quantized_cases
    return quantized_cases(seed)


def _qdq(case: Case, seed: int) -> list[Case]:
    from fpdiff.analysis.ops.quantized_cases import qdq_case
    return qdq_case(case, seed) if case.catalog == ONNX_CATALOG else []


def _by_backend(case: Case, seed: int) -> list[Case]:
    """The catalog case as it is, to be quantized by each backend (analysis/ops/quantized.py)."""
    del seed
    if case.variant != SAMPLE:
        return []
    from fpdiff.analysis.ops.quantized_cases import BY_BACKEND
    payload = case.payload
    if isinstance(payload, TorchSample):  # every float tensor but the first is the layer's weight: a parameter
        floats = [k for k, t in enumerate(_tensor_leaves(payload)) if _is_float(t)]
        payload = dataclasses.replace(payload, params=tuple(floats[1:]))
    return [dataclasses.replace(case, case_id=f"{case.case_id}~{BY_BACKEND}", variant=BY_BACKEND, payload=payload,
                                description=f"{case.description} | {BY_BACKEND}: each backend's own quantizer, int8"
                                f"{', weights as parameters' if getattr(payload, 'params', ()) else ''}")]


def _rng(seed: int, *keys: str) -> np.random.Generator:
    """A generator stable across runs and machines for (seed, keys): derived cases are the same every sweep."""
    return np.random.default_rng([seed, zlib.crc32(":".join(keys).encode())])


def _derived(case: Case, name: str, payload: Any, note: str, k: int | None = None, **changes: Any) -> Case:
    """A case derived from `case` by variant `name`; `k` numbers several from one case."""
    suffix = "" if k is None else f"-{k}"
    text = f"{case.description} | {name}: {note}" if case.description else f"{name}: {note}"
    return dataclasses.replace(case, case_id=f"{case.case_id}~{name}{suffix}", variant=name, description=text,
                               payload=payload, **changes)


def _tensor_leaves(sample: TorchSample) -> list:
    import torch
    from torch.utils import _pytree as pytree
    return [x for x in pytree.tree_leaves((tuple(sample.args), dict(sample.kwargs))) if isinstance(x, torch.Tensor)]


def _is_float(t: Any) -> bool:
    import torch
    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _map_floats(sample: TorchSample, fn: Callable) -> TorchSample:
    """The sample with `fn` applied to each float tensor leaf (in leaf order: fn gets the tensor and its index)."""
    import torch
    from torch.utils import _pytree as pytree
    counter = iter(range(1 << 30))

    def one(x):
        return fn(x, next(counter)) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
    args, kwargs = pytree.tree_map(one, (tuple(sample.args), dict(sample.kwargs)))
    return dataclasses.replace(sample, args=args, kwargs=kwargs)


def torch_outputs(sample: TorchSample) -> list[np.ndarray]:
    """The op's outputs at float64 (the judge's precision), as arrays; raises what the op raises."""
    import warnings

    import torch
    from torch.utils import _pytree as pytree

    from fpdiff.analysis.ops.torch_catalog import resolve
    args, kwargs = pytree.tree_map_only(
        torch.Tensor, lambda t: t.detach().clone().double() if t.is_floating_point() else t.clone(),
        (tuple(sample.args), dict(sample.kwargs)))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = resolve(sample.fn)(*args, **kwargs)
    return [t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t) for t in pytree.tree_leaves(out)]


def onnx_outputs(sample: OnnxSample) -> list[np.ndarray]:
    """The graph's outputs from the float64 reference evaluator (the judge's own float64 run)."""
    from fpdiff.onnxtools.graph import float64_values
    return [np.asarray(v) for v in float64_values(sample.model, dict(sample.inputs), intermediate=False)]


def outputs(case: Case) -> list[np.ndarray]:
    """A case's float64 outputs (of a quantized graph: its exact emulation, what its cells are judged against)."""
    if isinstance(case.payload, OnnxSample) and case.payload.quantized:
        from fpdiff.onnxtools.emulate import emulate
        return emulate(case.payload.model, case.payload.inputs).outputs
    return torch_outputs(case.payload) if case.catalog == TORCH_CATALOG else onnx_outputs(case.payload)


def _finite(outs: list[np.ndarray]) -> bool:
    return all(bool(np.isfinite(o).all()) for o in outs if o.dtype.kind in "fc")


def _peak(outs: list[np.ndarray]) -> float:
    floats = [np.abs(o[np.isfinite(o)]).max(initial=0.0) for o in outs if o.dtype.kind in "fc" and o.size]
    return float(max(floats, default=0.0))


def _runs(case: Case) -> list[np.ndarray] | None:
    """The case's float64 outputs, or None when the op refuses these inputs (a shape or a domain the derived case
    made invalid: that derived case is dropped, it would only measure the refusal)."""
    try:
        return outputs(case)
    except Exception:  # any refusal of the op itself; the judge would get the same, so the case says nothing
        return None


def _keeps_finite(original: Case, derived: Case) -> bool:
    """The derived case runs at float64, and stays finite where the original was: a non-finite exact answer would
    make every backend's cell a NaN comparison, not a test of its arithmetic."""
    got = _runs(derived)
    if got is None:
        return False
    before = _runs(original)
    return _finite(got) or before is None or not _finite(before)


# ---------------------------------------------------------------------------------------------------------------
# 1. layouts


def _channels_last(case: Case, seed: int) -> list[Case]:
    """The sample with its rank-4/5 float inputs in channels-last memory."""
    s = case.payload
    if case.catalog != TORCH_CATALOG or s.layout != CONTIGUOUS:
        return []
    # a channels-last tensor with one channel or one spatial element has contiguous strides: nothing would change
    if not any(_is_float(t) and t.dim() in (4, 5) and t.shape[1] > 1 and math.prod(t.shape[2:]) > 1
               for t in _tensor_leaves(s)):
        return []
    return [_derived(case, "channels-last", dataclasses.replace(s, layout=CHANNELS_LAST),
                     "rank-4/5 float inputs in channels-last memory")]


def _transposed(case: Case, seed: int) -> list[Case]:
    """The sample with its rank >= 2 float inputs reaching the op as transposed (non-contiguous) views."""
    s = case.payload
    if case.catalog != TORCH_CATALOG or s.layout != CONTIGUOUS:
        return []
    # a transposed view with a last or second-to-last dim of 1 is still contiguous: no other strides to test
    if not any(_is_float(t) and t.dim() >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1 for t in _tensor_leaves(s)):
        return []
    return [_derived(case, "transposed", dataclasses.replace(s, layout=TRANSPOSED),
                     "rank>=2 float inputs as non-contiguous transposed views")]


# ---------------------------------------------------------------------------------------------------------------
# 2. sizes


def _odd_sizes(case: Case, seed: int) -> list[Case]:
    """The sample's single float input re-made with its last dim 7, 63, 65 and 127 (other dims kept)."""
    s = case.payload
    if case.catalog != TORCH_CATALOG:
        return []
    leaves = _tensor_leaves(s)
    # one float tensor and nothing else: then only that tensor's shape defines the op's shapes and a new last dim
    # cannot break a relation between inputs (unary ops, reductions, activations)
    if len(leaves) != 1 or not _is_float(leaves[0]) or leaves[0].dim() < 1:
        return []
    import torch
    x = leaves[0]
    out = []
    for k, n in enumerate(ODD_SIZES):
        shape = (*x.shape[:-1], n)
        if n == x.shape[-1] or math.prod(shape) > MAX_ELEMENTS:
            continue
        z = _rng(seed, case.case_id, "odd-sizes", str(n)).standard_normal(shape)
        if bool((x >= 0).all()):  # an op whose sample is non-negative may need it (sqrt, log): keep the sign domain
            z = np.abs(z)
        new = _map_floats(s, lambda t, i, z=z: torch.from_numpy(z))
        derived = _derived(case, "odd-sizes", new, f"float input {list(shape)} N(0,1)", k)
        if _keeps_finite(case, derived):  # the op refuses the shape (a view, a fixed size): no case
            out.append(derived)
    return out


_LONG_TORCH = [  # (op name as OpInfo spells it, callable, kwargs, inputs: "pos" U(0,1), "normal" N(0,1), "matmul")
    ("sum", "torch.sum", {"dim": -1}, "pos"),
    ("mean", "torch.mean", {"dim": -1}, "pos"),
    ("var", "torch.var", {"dim": -1}, "pos"),
    ("std", "torch.std", {"dim": -1}, "pos"),
    ("linalg.vector_norm", "torch.linalg.vector_norm", {"dim": -1}, "pos"),
    ("cumsum", "torch.cumsum", {"dim": -1}, "pos"),
    ("softmax", "torch.softmax", {"dim": -1}, "normal"),  # its sum of exponentials is all-positive anyway
    ("log_softmax", "torch.log_softmax", {"dim": -1}, "normal"),
    ("logsumexp", "torch.logsumexp", {"dim": -1}, "normal"),
    ("matmul", "torch.matmul", {}, "matmul"),
]


def _long_inputs(kind: str, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs of a long reduction over n terms: all-positive for sum-like ops, so the error measured is the
    accumulator's and not cancellation's."""
    if kind == "matmul":
        return [rng.uniform(0, 1, (2, n)), rng.uniform(0, 1, (n, 2))]
    return [rng.uniform(0, 1, (2, n)) if kind == "pos" else rng.standard_normal((2, n))]


def _long_torch(seed: int) -> list[Case]:
    import torch
    out = []
    for op, fn, kwargs, kind in _LONG_TORCH:
        for n in LONG_TERMS:
            xs = [torch.from_numpy(a) for a in _long_inputs(kind, n, _rng(seed, "long-reduction", op, str(n)))]
            shapes = " x ".join(str(list(x.shape)) for x in xs)
            out.append(Case(TORCH_CATALOG, op, f"{op}~long-reduction-{n}", "long-reduction",
                            f"long-reduction: {n} terms, {shapes}, {kind} inputs",
                            payload=TorchSample(fn, tuple(xs), dict(kwargs))))
    return out


_LONG_ONNX = [  # (op_type, attributes, axes as a second input?, inputs kind)
    ("ReduceSum", {"keepdims": 0}, True, "pos"),
    ("ReduceMean", {"keepdims": 0}, True, "pos"),
    ("ReduceL2", {"keepdims": 0}, True, "pos"),
    ("CumSum", {}, True, "pos"),
    ("Softmax", {"axis": -1}, False, "normal"),
    ("LogSoftmax", {"axis": -1}, False, "normal"),
    ("ReduceLogSumExp", {"keepdims": 0}, True, "normal"),
    ("MatMul", {}, False, "matmul"),
]


def _long_onnx(seed: int) -> list[Case]:
    from onnx import numpy_helper
    out = []
    for op, attrs, axes, kind in _LONG_ONNX:
        for n in LONG_TERMS:
            arrays = [a.astype(np.float32) for a in _long_inputs(kind, n, _rng(seed, "long-reduction", op, str(n)))]
            names = ["X", "Y"][:len(arrays)]
            consts = []
            if axes:  # axes is an input since opset 13 (ReduceSum, CumSum) or 18 (the others): a constant here
                const = np.array(-1 if op == "CumSum" else [-1], dtype=np.int64)
                consts = [numpy_helper.from_array(const, "axes")]
            model = _one_node(op, names + (["axes"] if axes else []), attrs, {k: v for k, v in zip(names, arrays)},
                              consts)
            out.append(Case(ONNX_CATALOG, op, f"{op}~long-reduction-{n}", "long-reduction",
                            f"long-reduction: {n} terms, {kind} inputs",
                            payload=OnnxSample(model, dict(zip(names, arrays)))))
    return out


def _long_reduction(seed: int) -> list[Case]:
    return _long_torch(seed) + _long_onnx(seed)


# ---------------------------------------------------------------------------------------------------------------
# 3. dims


# a sample's mixes are the proper non-empty subsets of its first MIX_DIMS dynamic dims: 3 dims give 6 mixes, the
# bound on the cases `mixed` makes per op (4 dims would give 14); the dims past them stay static
MIX_DIMS = 3


def _dims_torch(case: Case) -> tuple | None:
    """Per tensor leaf, its dims of size >= 2; None when there are none. torch.export specializes dims of size 0 and 1
    (a 1 broadcasts, so it becomes a constant): they stay static."""
    leaves = _tensor_leaves(case.payload)
    dyn = tuple(tuple(d for d in range(t.dim()) if t.shape[d] >= 2) for t in leaves)
    return dyn if any(dyn) else None


def _declared(sample: TorchSample, wanted: tuple) -> dict:
    """The catalog's declaration of `wanted` dynamic ({input: {dim: (Dim name, min, max)}}, as write_case will make
    it): raises NotMade with export's reason when no dim of them can be declared."""
    from fpdiff.analysis.ops.torch_catalog import declare_dims_why, input_names
    declared, why = declare_dims_why(dataclasses.replace(sample, dynamic=wanted), input_names(sample))
    if not declared:
        raise NotMade(why)
    return declared


def _exportable(sample: TorchSample, wanted: tuple) -> tuple:
    """Of the dims wanted dynamic, those torch.export keeps dynamic in every shape variant check's grid makes of
    them (the catalog's Dim.AUTO probe decides, as it will when it writes the case). A dim the op fixes (layer_norm's
    normalized_shape, a reshape's target) stays static: declared, it would only make the export fail on every
    backend alike. Raises NotMade when none is kept (the op does not export, or refuses a mix of them)."""
    from fpdiff.analysis.ops.torch_catalog import input_names
    declared = _declared(sample, wanted)
    return tuple(tuple(sorted(declared.get(n, {}))) for n in input_names(sample))


def _dynamic_torch(case: Case, name: str = "dynamic") -> list[Case]:
    wanted = _dims_torch(case)
    if wanted is None or case.payload.dynamic:
        return []
    dyn = _exportable(case.payload, wanted)
    return [_derived(case, name, dataclasses.replace(case.payload, dynamic=dyn),
                     f"every dim of size >= 2 dynamic {list(dyn)}")]


def mixes(dims: Sequence[str]) -> list[tuple[str, ...]]:
    """Every proper non-empty subset of the first MIX_DIMS dims, smallest first: each the dynamic dims of one mix."""
    head = list(dims)[:MIX_DIMS]
    return [c for r in range(1, len(head)) for c in itertools.combinations(head, r)]


def _mixed_torch(case: Case) -> list[Case | NotMade]:
    """One case per mix of the sample's dynamic dims (export's symbols: dims it finds equal are one), each with only
    that mix declared; a mix export refuses, or in which it specializes a dim of the mix, is a NotMade."""
    from fpdiff.analysis.ops.torch_catalog import declare_dims_why, input_names
    sample = case.payload
    wanted = _dims_torch(case)
    if wanted is None or sample.dynamic:
        return []
    names = input_names(sample)
    declared = _declared(sample, wanted)
    symbols = list(dict.fromkeys(dim for per in declared.values() for dim, _, _ in per.values()))
    out: list[Case | NotMade] = []
    for k, mix in enumerate(mixes(symbols)):
        dyn = tuple(tuple(sorted(d for d, (dim, _, _) in declared.get(n, {}).items() if dim in mix)) for n in names)
        cid = f"{case.case_id}~mixed-{k}"
        got, why = declare_dims_why(dataclasses.replace(sample, dynamic=dyn), names)
        if {(n, d) for n, per in got.items() for d in per} != {(n, d) for n, ds in zip(names, dyn) for d in ds}:
            out.append(NotMade(f"dynamic {', '.join(mix)}: " + (why or "torch.export makes a dim of it static"),
                               cid))
            continue
        note = f"dynamic {', '.join(mix)}; static {', '.join(d for d in symbols if d not in mix)} and the rest"
        out.append(_derived(case, "mixed", dataclasses.replace(sample, dynamic=dyn), note, k))
    return out


def _onnx_dims(model: Any) -> list[tuple[str, int]]:
    """(graph input, axis) of every fixed input dim (initializers aside), in input order."""
    inits = {i.name for i in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        out += [(vi.name, i) for i, d in enumerate(vi.type.tensor_type.shape.dim) if d.HasField("dim_value")]
    return out


def _symbolic_onnx(model: Any, chosen: set[tuple[str, int]]) -> Any:
    """A copy of the graph with the chosen (input, axis) dims symbolic, each its own symbol; output dims become free
    symbols (a static output shape would contradict inputs that may change)."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            for i, d in enumerate(vi.type.tensor_type.shape.dim):
                if (vi.name, i) in chosen:
                    d.dim_param = f"{vi.name}_d{i}"
    for j, vo in enumerate(m.graph.output):
        if vo.type.HasField("tensor_type") and vo.type.tensor_type.HasField("shape"):
            for i, d in enumerate(vo.type.tensor_type.shape.dim):
                d.dim_param = f"out{j}_d{i}"
    del m.graph.value_info[:]
    return m


def _dynamic_onnx(case: Case) -> list[Case]:
    dims = _onnx_dims(case.payload.model)
    if not dims:
        return []
    model = _symbolic_onnx(case.payload.model, set(dims))
    return [_derived(case, "dynamic", dataclasses.replace(case.payload, model=model), "every input dim symbolic")]


def _mixed_onnx(case: Case, name: str = "mixed") -> list[Case]:
    """One case per mix of the inputs' dims of size >= 2 (a dim of 1 broadcasts: static or not, the same graph)."""
    model = case.payload.model
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in model.graph.input
              if vi.type.HasField("tensor_type")}
    dims = [f"{n}_d{i}" for n, i in _onnx_dims(model) if shapes[n][i] >= 2]
    out = []
    for k, mix in enumerate(mixes(dims)):
        chosen = {(n, int(i)) for n, _, i in (d.rpartition("_d") for d in mix)}
        note = f"dynamic {', '.join(mix)}; static {', '.join(d for d in dims[:MIX_DIMS] if d not in mix)} and the rest"
        out.append(_derived(case, name, dataclasses.replace(case.payload, model=_symbolic_onnx(model, chosen)),
                            note, k))
    return out


def _dynamic(case: Case, seed: int) -> list[Case]:
    return _dynamic_torch(case) if case.catalog == TORCH_CATALOG else _dynamic_onnx(case)


def _mixed(case: Case, seed: int) -> list:
    return _mixed_torch(case) if case.catalog == TORCH_CATALOG else _mixed_onnx(case)


# index ops: where SEEDS #2's router bug lives (an index computed from one static and one dynamic dim); the globs
# name the catalogs' scatter, gather, index_*, take, one_hot and embedding ops
INDEX_OPS = ("*scatter*", "*gather*", "index_*", "take*", "*one_hot", "onehot", "nn.functional.embedding*",
             "_unsafe_masked_index*", "put", "masked_scatter")


def _mixed_index(case: Case, seed: int) -> list:
    """The mixes of an index op at the cost of one case where the grid mixes by itself: torch, one case with every
    dim dynamic (check's grid runs it static, dynamic and in each mix as shape variants); ONNX, one case per mix
    (the grid does not mix symbolic dims)."""
    if not matches(case.op, list(INDEX_OPS)):
        return []
    return _dynamic_torch(case, "mixed-index") if case.catalog == TORCH_CATALOG else _mixed_onnx(case, "mixed-index")


# ---------------------------------------------------------------------------------------------------------------
# 4. attributes (purpose-built)


def _one_node(op: str, inputs: list[str], attrs: dict, feeds: dict, consts: list | None = None,
              outputs: tuple[str, ...] = ("Y_out",), types: Sequence[int] = ()) -> Any:
    """A one-node graph at OPSET: `feeds` (name -> array) are graph inputs, `consts` initializers."""
    from onnx import helper
    node = helper.make_node(op, inputs, list(outputs), **attrs)
    return _graph([node], feeds, consts or [], outputs, types)


def _graph(nodes: list, feeds: dict, consts: list, outputs: Sequence[str], types: Sequence[int] = ()) -> Any:
    """The graph of `nodes` at OPSET; `types`: the outputs' element types where not all float (ArgMax's int64)."""
    import onnx
    from onnx import helper
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
           for n, a in feeds.items()]
    kinds = list(types) or [onnx.TensorProto.FLOAT] * len(outputs)
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in zip(outputs, kinds)]
    graph = helper.make_graph(nodes, "fpdiff_variant", ins, outs, initializer=consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    # strict inference fills the outputs' types and shapes and refuses a graph whose attributes do not fit
    model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    onnx.checker.check_model(model)
    return model


class _Traits(TypedDict, total=False):
    """A purpose-built torch case's optional traits: `integer_valued` outputs, keyword `tensors` (name -> array:
    layer_norm's weight=, gather's index=) that are inputs of the model like its arrays, and `exact` integer arrays
    that keep their own dtype (uint8, int8, int32), not the int64 of indices."""
    integer_valued: bool
    tensors: dict | None
    exact: bool


def _t(op: str, name: str, k: int, fn: str, arrays: list[np.ndarray], kwargs: dict, note: str,
       **traits: Unpack[_Traits]) -> Case:
    """A purpose-built torch case: `fn` on float64 tensors made of `arrays`, plus baked-in `kwargs` (and the
    traits: _Traits)."""
    exact, integer_valued = traits.get("exact", False), traits.get("integer_valued", False)
    args = tuple(_tensor(a, exact) for a in arrays)
    named = {n: _tensor(a, exact) for n, a in (traits.get("tensors") or {}).items()}
    shapes = ", ".join([str(list(a.shape)) for a in args] + [f"{n}={list(a.shape)}" for n, a in named.items()])
    return Case(TORCH_CATALOG, op, f"{op}~{name}-{k}", name, f"{name}: {shapes}, {note}", integer_valued,
                TorchSample(fn, args, dict(kwargs) | named))


def _tensor(a: np.ndarray, exact: bool = False) -> Any:
    """A float array as the float64 input the grid casts per precision; an integer one (indices) as int64, or in its
    own dtype when `exact`."""
    import torch
    a = np.asarray(a)
    if exact and a.dtype.kind in "iub":
        return torch.from_numpy(np.ascontiguousarray(a))
    return torch.from_numpy(np.asarray(a, dtype=np.int64 if a.dtype.kind in "iub" else np.float64))


def _o(op: str, name: str, k: int, model: Any, feeds: dict, note: str, integer_valued: bool = False) -> Case:
    """A purpose-built ONNX case (no expected output: the catalog has none for it)."""
    shapes = ", ".join(str(list(a.shape)) for a in feeds.values())
    return Case(ONNX_CATALOG, op, f"{op}~{name}-{k}", name, f"{name}: {shapes}, {note}", integer_valued,
                OnnxSample(model, dict(feeds)))


def _i64(name: str, values: list) -> Any:
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


# (kernel, stride, pad, dilation): with ceil_mode the last window starts inside the input or its left padding and
# hangs off the right edge past the padding, where frameworks disagree on the divisor and on whether it exists
_AVG_POOLS = [(3, 2, 1), (2, 2, 1)]
_MAX_POOLS = [(3, 2, 1, 1), (3, 2, 1, 2)]
_POOL_SHAPES = [(1, 2, 6, 6), (1, 3, 7, 5)]


def _pool_ceil(seed: int) -> list[Case]:
    out, k = [], 0
    for shape in _POOL_SHAPES:
        x = _rng(seed, "pool-ceil", str(shape)).standard_normal(shape)
        for kern, stride, pad in _AVG_POOLS:
            for cip in (True, False):
                kw = dict(kernel_size=kern, stride=stride, padding=pad, ceil_mode=True, count_include_pad=cip)
                out.append(_t("nn.functional.avg_pool2d", "pool-ceil", k, "torch.nn.functional.avg_pool2d", [x],
                              kw, _kw(kw)))
                attrs = dict(kernel_shape=[kern] * 2, strides=[stride] * 2, pads=[pad] * 4, ceil_mode=1,
                             count_include_pad=int(cip))
                feeds = {"X": x.astype(np.float32)}
                out.append(_o("AveragePool", "pool-ceil", k, _one_node("AveragePool", ["X"], attrs, feeds), feeds,
                              _kw(attrs)))
                k += 1
        for kern, stride, pad, dil in _MAX_POOLS:
            kw = dict(kernel_size=kern, stride=stride, padding=pad, dilation=dil, ceil_mode=True)
            out.append(_t("nn.functional.max_pool2d", "pool-ceil", k, "torch.nn.functional.max_pool2d", [x], kw,
                          _kw(kw)))
            attrs = dict(kernel_shape=[kern] * 2, strides=[stride] * 2, pads=[pad] * 4, dilations=[dil] * 2,
                         ceil_mode=1)
            feeds = {"X": x.astype(np.float32)}
            out.append(_o("MaxPool", "pool-ceil", k, _one_node("MaxPool", ["X"], attrs, feeds), feeds, _kw(attrs)))
            k += 1
    return out


def _kw(d: dict) -> str:
    return " ".join(f"{a}={v}" for a, v in d.items())


# (input shape, output size): a downscale (where antialias widens the filter) and an upscale
_RESIZES = [((1, 2, 8, 8), (5, 3)), ((1, 2, 5, 5), (9, 11))]


def _antialias(seed: int) -> list[Case]:
    out, k = [], 0
    for shape, size in _RESIZES:
        x = _rng(seed, "antialias", str(shape)).standard_normal(shape)
        for mode, onnx_mode in (("bilinear", "linear"), ("bicubic", "cubic")):
            for align in (False, True):
                kw = dict(size=size, mode=mode, align_corners=align, antialias=True)
                out.append(_t(f"nn.functional.interpolate.{mode}", "antialias", k,
                              "torch.nn.functional.interpolate", [x], kw, _kw(kw)))
                # torch's coordinate maps: align_corners or half_pixel; its bicubic uses a = -0.75
                attrs = dict(mode=onnx_mode, antialias=1, cubic_coeff_a=-0.75,
                             coordinate_transformation_mode="align_corners" if align else "half_pixel")
                feeds = {"X": x.astype(np.float32)}
                model = _one_node("Resize", ["X", "", "", "sizes"], attrs, feeds, [_i64("sizes", [*shape[:2],
                                                                                                  *size])])
                out.append(_o("Resize", "antialias", k, model, feeds, _kw(attrs) + f" sizes={list(size)}"))
                k += 1
    return out


def _grid_outside(seed: int) -> list[Case]:
    out, k = [], 0
    rng = _rng(seed, "grid-outside")
    x = rng.standard_normal((1, 2, 5, 6))
    # sampling points up to 1.6 outside the [-1, 1] square: every padding mode's edge rule is exercised
    grid = rng.uniform(-1.6, 1.6, (1, 4, 3, 2))
    for mode, onnx_mode in (("bilinear", "linear"), ("bicubic", "cubic")):
        for pad in ("zeros", "border", "reflection"):
            for align in (False, True):
                kw = dict(mode=mode, padding_mode=pad, align_corners=align)
                out.append(_t("nn.functional.grid_sample", "grid-outside", k, "torch.nn.functional.grid_sample",
                              [x, grid], kw, _kw(kw)))
                attrs = dict(mode=onnx_mode, padding_mode=pad, align_corners=int(align))
                feeds = {"X": x.astype(np.float32), "Grid": grid.astype(np.float32)}
                out.append(_o("GridSample", "grid-outside", k, _one_node("GridSample", ["X", "Grid"], attrs, feeds),
                              feeds, _kw(attrs)))
                k += 1
    return out


# (shape, torch pad: last dim first, (begin, end) pairs): both within reflect's limit (pad < dim size)
_PADS = [((1, 2, 5, 6), (2, 1, 1, 3)), ((2, 3, 7), (3, 2))]
_PAD_MODES = [("constant", "constant"), ("reflect", "reflect"), ("replicate", "edge"), ("circular", "wrap")]


def _onnx_pads(rank: int, torch_pad: tuple) -> list[int]:
    """torch's pad (last dim first, begin/end pairs) as ONNX's pads (every axis's begins, then every end)."""
    begins, ends = [0] * rank, [0] * rank
    for j in range(len(torch_pad) // 2):
        begins[rank - 1 - j], ends[rank - 1 - j] = torch_pad[2 * j], torch_pad[2 * j + 1]
    return begins + ends


def _pad_modes(seed: int) -> list[Case]:
    from onnx import numpy_helper
    out, k = [], 0
    for shape, pad in _PADS:
        x = _rng(seed, "pad-modes", str(shape)).standard_normal(shape)
        for mode, onnx_mode in _PAD_MODES:
            kw: dict = dict(pad=pad, mode=mode) | ({"value": 0.5} if mode == "constant" else {})
            out.append(_t("nn.functional.pad", "pad-modes", k, "torch.nn.functional.pad", [x], kw, _kw(kw)))
            feeds = {"X": x.astype(np.float32)}
            consts = [_i64("pads", _onnx_pads(len(shape), pad))]
            ins = ["X", "pads"]
            if mode == "constant":
                consts.append(numpy_helper.from_array(np.array(0.5, dtype=np.float32), "value"))
                ins.append("value")
            model = _one_node("Pad", ins, {"mode": onnx_mode}, feeds, consts)
            out.append(_o("Pad", "pad-modes", k, model, feeds, f"mode={onnx_mode} pads={_onnx_pads(len(shape), pad)}"))
            k += 1
    return out


# ---------------------------------------------------------------------------------------------------------------
# 5. ranges


def _near_max(x, i, scale):
    return x * (scale / max(float(x.abs().max()), 1e-300))


def _tiny_values(x, rng: np.random.Generator):
    """The tensor's signs (zeros kept) on log-uniform magnitudes across fp16's subnormals."""
    import torch
    lo, hi = np.log10(TINY_RANGE[0]), np.log10(TINY_RANGE[1])
    mags = torch.from_numpy(np.asarray(10.0 ** rng.uniform(lo, hi, tuple(x.shape))))
    return torch.sign(x.double()) * mags


def _ranged(case: Case, name: str, fn: Callable) -> Case | None:
    """The case with fn(array or tensor, index) applied to each float input; None for a case without one."""
    if case.catalog == TORCH_CATALOG:
        if not any(_is_float(t) for t in _tensor_leaves(case.payload)):
            return None
        return dataclasses.replace(case, payload=_map_floats(case.payload, fn))
    s: OnnxSample = case.payload
    if not any(np.asarray(a).dtype.kind == "f" for a in s.inputs.values()):
        return None
    inputs = {n: (fn(a, i).astype(a.dtype) if a.dtype.kind == "f" else a)
              for i, (n, a) in enumerate((n, np.asarray(a)) for n, a in s.inputs.items())}
    # the catalog's expected outputs belong to its own inputs
    return dataclasses.replace(case, payload=OnnxSample(s.model, inputs, None))


def _near_max_case(case: Case, seed: int) -> list[Case]:
    """Float inputs scaled to |x| <= 32752; where the exact output would leave fp16's range there, to 181 (a
    product of two inputs then nears the max). The exact output must stay within fp16's max: an output fp16 cannot
    hold overflows on every backend alike, which is the dtype, not a backend."""
    for scale in (NEAR_MAX, math.sqrt(NEAR_MAX)):
        made = _ranged(case, "near-max", lambda x, i, s=scale: _near_max(x, i, s) if not isinstance(x, np.ndarray)
                       else x * (s / max(float(np.abs(x).max(initial=0.0)), 1e-300)))
        if made is None:
            return []
        got = _runs(made)
        if got is not None and _finite(got) and _peak(got) <= FP16_MAX:
            return [_derived(case, "near-max", made.payload, f"float inputs scaled to max |x| = {scale:.6g}")]
    return []


def _tiny_case(case: Case, seed: int) -> list[Case]:
    rng = _rng(seed, case.case_id, "tiny")

    def tiny(x, i):
        if isinstance(x, np.ndarray):
            return np.asarray(np.sign(x) * 10.0 ** rng.uniform(*np.log10(TINY_RANGE), x.shape))
        return _tiny_values(x, rng)
    made = _ranged(case, "tiny", tiny)
    if made is None or not _keeps_finite(case, made):
        return []
    return [_derived(case, "tiny", made.payload, f"float inputs' magnitudes log-uniform in {list(TINY_RANGE)}")]


def _positive_case(case: Case, seed: int) -> list[Case]:
    made = _ranged(case, "positive", lambda x, i: abs(x) + POSITIVE_OFFSET)
    if made is None or not _keeps_finite(case, made):
        return []
    return [_derived(case, "positive", made.payload, f"float inputs |x| + {POSITIVE_OFFSET}")]


# ---------------------------------------------------------------------------------------------------------------
# 6. integer paths inside float models

QUANT_SCALE, QUANT_ZERO = 0.05, 128  # 0.05 covers N(0,1) x 2 in [-6.4, 6.35]; 128: the uint8 midpoint


def _quantize_u8(x, scale: float, zero_point: int):
    import torch
    return torch.clamp(torch.round(x / scale) + zero_point, 0, 255).to(torch.uint8)


def quantize_minmax_codes(x, y, scale: float = QUANT_SCALE, zero_point: int = QUANT_ZERO):
    """max and min of two inputs quantized to uint8, as their codes (integers in float): a backend that rounds
    x / scale at a lower precision or differently (half away from zero instead of to even) flips codes."""
    import torch
    qx, qy = _quantize_u8(x, scale, zero_point), _quantize_u8(y, scale, zero_point)
    return torch.maximum(qx, qy).to(x.dtype), torch.minimum(qx, qy).to(x.dtype)


def quantize_minmax(x, y, scale: float = QUANT_SCALE, zero_point: int = QUANT_ZERO):
    """max and min of two inputs quantized to uint8, dequantized back to float: the integer path in the middle of
    a float model, as a quantized model's activations take it."""
    import torch
    qx, qy = _quantize_u8(x, scale, zero_point), _quantize_u8(y, scale, zero_point)
    deq = [(q.to(x.dtype) - zero_point) * scale for q in (torch.maximum(qx, qy), torch.minimum(qx, qy))]
    return tuple(deq)


def _quantize_int(seed: int) -> list[Case]:
    from onnx import helper, numpy_helper
    rng = _rng(seed, "quantize-int")
    x, y = 2 * rng.standard_normal((3, 65)), 2 * rng.standard_normal((3, 65))
    here = "fpdiff.analysis.ops.variants"
    out = [_t("quantize_minmax", "quantize-int", 0, f"{here}.quantize_minmax_codes", [x, y], {},
              f"uint8 codes of max/min, scale={QUANT_SCALE} zero_point={QUANT_ZERO}", integer_valued=True),
           _t("quantize_minmax", "quantize-int", 1, f"{here}.quantize_minmax", [x, y], {},
              f"dequantized max/min, scale={QUANT_SCALE} zero_point={QUANT_ZERO}")]
    feeds = {"X": x.astype(np.float32), "Y": y.astype(np.float32)}
    consts = [numpy_helper.from_array(np.array(QUANT_SCALE, dtype=np.float32), "scale"),
              numpy_helper.from_array(np.array(QUANT_ZERO, dtype=np.uint8), "zero")]
    quant = [helper.make_node("QuantizeLinear", [n, "scale", "zero"], [f"q{n}"]) for n in ("X", "Y")]
    minmax = [helper.make_node("Max", ["qX", "qY"], ["qmax"]), helper.make_node("Min", ["qX", "qY"], ["qmin"])]
    codes = [helper.make_node("Cast", [q], [o], to=1) for q, o in (("qmax", "MAX"), ("qmin", "MIN"))]
    deq = [helper.make_node("DequantizeLinear", [q, "scale", "zero"], [o]) for q, o in (("qmax", "MAX"),
                                                                                         ("qmin", "MIN"))]
    out.append(_o("QuantizeLinear", "quantize-int", 0, _graph(quant + minmax + codes, feeds, consts, ["MAX", "MIN"]),
                  feeds, "QuantizeLinear -> uint8 Max/Min -> Cast: codes", integer_valued=True))
    out.append(_o("QuantizeLinear", "quantize-int", 1, _graph(quant + minmax + deq, feeds, consts, ["MAX", "MIN"]),
                  feeds, "QuantizeLinear -> uint8 Max/Min -> DequantizeLinear"))
    return out


# ---------------------------------------------------------------------------------------------------------------
# 7. SEEDS #3: a 1-D conv with NHC input, CHF filter, NHF output

SEED3_INPUT = [[[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]]  # N=1, H=3, C=2
SEED3_FILTER = [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]  # C=2, H(kernel)=2, F=2
SEED3_EXPECTED = [[[5.0, 6.0], [0.0, 0.0]]]  # N=1, H=2, F=2; the report's wrong answer read C and H swapped: [3, 4]


def seed3_conv(x_nhc, filter_chf):
    """The report's conv: NHC input and CHF filter permuted to torch's NCH / FCH around conv1d, its NCH output back
    to NHF, so the backend sees the layout transposes next to the conv."""
    import torch.nn.functional as F
    return F.conv1d(x_nhc.permute(0, 2, 1), filter_chf.permute(2, 0, 1)).permute(0, 2, 1)


def _seed3(seed: int) -> list[Case]:
    from onnx import helper
    x, w = np.array(SEED3_INPUT), np.array(SEED3_FILTER)
    out = [_t("nn.functional.conv1d", "seed3-conv", 0, "fpdiff.analysis.ops.variants.seed3_conv", [x, w], {},
              "NHC input, CHF filter, NHF output (SEEDS #3), correct output [[5, 6], [0, 0]]")]
    feeds = {"X": x.astype(np.float32), "W": w.astype(np.float32)}
    nodes = [helper.make_node("Transpose", ["X"], ["x_nch"], perm=[0, 2, 1]),
             helper.make_node("Transpose", ["W"], ["w_fch"], perm=[2, 0, 1]),
             helper.make_node("Conv", ["x_nch", "w_fch"], ["y_nfh"]),
             helper.make_node("Transpose", ["y_nfh"], ["Y_out"], perm=[0, 2, 1])]
    out.append(_o("Conv", "seed3-conv", 0, _graph(nodes, feeds, [], ["Y_out"]), feeds,
                  "Transpose -> Conv -> Transpose, NHC input, CHF filter (SEEDS #3), correct [[5, 6], [0, 0]]"))
    return out


# ---------------------------------------------------------------------------------------------------------------
# 8. ties: exact repeats where the op's spec fixes which one wins

# the tie grid: inputs snapped to {-1, -0.5, 0, 0.5, 1} x max|x| / max|x|, i.e. the values -1..1 in steps of 0.5:
# five levels make repeats (and a repeated maximum) in any row of more than a few elements, every level is exact in
# fp16 and bf16 (a tie at float64 stays one at every precision), and the map is monotone (a sorted input stays
# sorted: searchsorted's sequence, bucketize's boundaries); +-0.5 are round's half-way cases
TIE_STEP = 0.5
TIE_LEVELS = 2  # steps either side of 0

# ops whose catalog samples get tie inputs, each with the spec that fixes the tie's answer. Left out on purpose, as
# their spec leaves the tie's index undefined and a backend choosing another is no bug: torch.topk, kthvalue, median,
# nanmedian, mode, cummax/cummin (indices), msort and sort/argsort with stable=False, max_pool's return_indices; those
# get purpose-built cases that compare the input at the returned index instead (picks), which every allowed index
# answers alike. The value-only selections (amax, max without dim, maximum) are tie-insensitive: one answer.
_TIE_TORCH = {
    "amax": "a maximum's value is the same whichever of the tied elements gives it",
    "amin": "a minimum's value is the same whichever of the tied elements gives it",
    "max.reduction_no_dim": "a maximum's value is the same whichever of the tied elements gives it",
    "min.reduction_no_dim": "a minimum's value is the same whichever of the tied elements gives it",
    "maximum": "equal operands give one value",
    "minimum": "equal operands give one value",
    "argmax": "torch.argmax returns the first maximal index (documented)",
    "argmin": "torch.argmin returns the first minimal index (documented)",
    "max.reduction_with_dim": "torch.max(dim) returns the first maximal value's index (documented)",
    "min.reduction_with_dim": "torch.min(dim) returns the first minimal value's index (documented)",
    "round": "torch.round rounds half to even (documented)",
    "sort": "stable=True keeps equal elements in input order (set here: the unstable order is undefined)",
    "argsort": "stable=True keeps equal elements in input order (set here: the unstable order is undefined)",
    "searchsorted": "right= (side) fixes the index a value equal to an entry gets",
    "bucketize": "right= fixes the bucket a value equal to a boundary falls in",
}
_TIE_ONNX = {
    "ArgMax": "select_last_index fixes the first (0, default) or last occurrence",
    "ArgMin": "select_last_index fixes the first (0, default) or last occurrence",
    "TopK": "the spec breaks ties by the lower index, which comes first",
    "Round": "the spec rounds half to even",
    "ReduceMax": "a maximum's value is the same whichever of the tied elements gives it",
    "ReduceMin": "a minimum's value is the same whichever of the tied elements gives it",
    "Max": "equal operands give one value",
    "Min": "equal operands give one value",
}
_STABLE = ("sort", "argsort")  # ops whose tie cases set stable=True


def snap_ties(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Float arrays on the tie grid, one scale for all (max |x| of them together): the same monotone map for every
    input, so inputs that must stay ordered against each other (a sequence and its values) do."""
    finite = [np.abs(a[np.isfinite(a)]) for a in arrays if a.dtype.kind == "f" and a.size]
    m = max((float(f.max(initial=0.0)) for f in finite), default=0.0)
    if m == 0.0:
        return list(arrays)
    return [np.asarray(np.clip(np.round(a * (TIE_LEVELS / m)), -TIE_LEVELS, TIE_LEVELS) * TIE_STEP, dtype=a.dtype)
            if a.dtype.kind == "f" else a for a in arrays]


def has_ties(arrays: list[np.ndarray]) -> bool:
    """Some float array repeats a value (the tie a case of this variant must hold)."""
    return any(a.dtype.kind == "f" and np.unique(a).size < a.size for a in arrays)


def _ties_case(case: Case, seed: int) -> list[Case]:
    """The sample with its float inputs on the tie grid, for ops whose spec fixes who wins a tie."""
    import torch
    if case.catalog == TORCH_CATALOG:
        why = _TIE_TORCH.get(case.op)
        if why is None:
            return []
        s: TorchSample = case.payload
        floats = [t.numpy() for t in _tensor_leaves(s) if _is_float(t)]
        snapped = iter(snap_ties(floats))
        new = _map_floats(s, lambda t, i: torch.from_numpy(next(snapped)))
        if case.op in _STABLE:
            new = dataclasses.replace(new, kwargs={**new.kwargs, "stable": True})
        arrays = [t.numpy() for t in _tensor_leaves(new) if _is_float(t)]
    else:
        why = _TIE_ONNX.get(case.op)
        if why is None:
            return []
        o: OnnxSample = case.payload
        names = [n for n, a in o.inputs.items() if np.asarray(a).dtype.kind == "f"]
        snapped_onnx = dict(zip(names, snap_ties([np.asarray(o.inputs[n]) for n in names])))
        # the catalog's expected outputs belong to its own inputs
        new = OnnxSample(o.model, {n: snapped_onnx.get(n, a).astype(np.asarray(a).dtype) for n, a in o.inputs.items()})
        arrays = [new.inputs[n] for n in names]
    derived = _derived(case, "ties", new, f"float inputs on the tie grid -1..1 step {TIE_STEP} ({why})")
    return [derived] if has_ties(arrays) and _keeps_finite(case, derived) else []


def _tie_matrix(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Rows on the tie grid whose maximum (1.5) and minimum (-1.5) each sit at two places or more: every row is a
    tie for arg-max and arg-min alike, so a backend with another tie rule flips an index in every row."""
    m = rng.integers(-2, 3, (rows, cols)) * TIE_STEP
    for r in range(rows):
        hi, lo = np.split(rng.permutation(cols)[:4], 2)
        m[r, hi], m[r, lo] = 1.5, -1.5
    return m


def tie_halves(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Half-way values k + 0.5 (k in -4..3) and their integer neighbours: round half to even gives -4, -2, 0, 2 at
    the halves where half away from zero, or half up, gives another answer."""
    halves = rng.integers(-4, 4, shape) + 0.5
    return np.where(rng.random(shape) < 0.75, halves, np.round(halves - 0.5))


# (coordinate mode, input side, scales or None, sizes or None): each puts source coordinates exactly at .5, where
# the nearest mode alone decides: half_pixel at 0.5x gives 2x + 0.5, asymmetric at 2x gives x / 2, align_corners
# 4 -> 3 gives 1.5x; the scales and the ratio 3/2 are exact in binary, so every backend computes the same coordinate
_NEAREST = [("half_pixel", 4, [1.0, 1.0, 0.5, 0.5], None), ("asymmetric", 3, [1.0, 1.0, 2.0, 2.0], None),
            ("align_corners", 4, None, [1, 1, 3, 3])]
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")

# torch's nearest modes at exact factors (kwargs, why the answer is fixed): `nearest` is floor(dst x in/out),
# `nearest-exact` floor((dst + 0.5) x in/out), which at a downscale by 2 lands exactly on the boundary 2 dst + 1
_TORCH_NEAREST = [({"scale_factor": 2.0, "mode": "nearest"}, 3, "nearest up x2: floor(dst / 2)"),
                  ({"size": (3, 3), "mode": "nearest"}, 6, "nearest down x2: floor(2 dst)"),
                  ({"size": (3, 3), "mode": "nearest-exact"}, 6, "nearest-exact down x2: floor(2 dst + 1) on the "
                   "boundary"),
                  ({"scale_factor": 2.0, "mode": "nearest-exact"}, 3, "nearest-exact up x2")]


def _ties_torch(seed: int) -> list[Case]:
    rng = _rng(seed, "ties", "torch")
    m, mt = _tie_matrix(rng, 4, 6), _tie_matrix(rng, 4, 6).T
    out = [_t("argmax", "ties", 0, "torch.argmax", [m], {"dim": 1}, "dim=1, max repeated in every row (first wins)"),
           _t("argmin", "ties", 1, "torch.argmin", [m], {"dim": 1}, "dim=1, min repeated in every row (first wins)"),
           _t("argmax", "ties", 2, "torch.argmax", [mt], {"dim": 0}, "dim=0, max repeated in every column"),
           _t("max.reduction_with_dim", "ties", 3, "torch.max", [m], {"dim": 1}, "dim=1 (first maximal index)"),
           _t("min.reduction_with_dim", "ties", 4, "torch.min", [m], {"dim": 1}, "dim=1 (first minimal index)"),
           _t("sort", "ties", 5, "torch.sort", [m], {"dim": 1, "stable": True}, "stable, ascending"),
           _t("sort", "ties", 6, "torch.sort", [m], {"dim": 1, "stable": True, "descending": True},
              "stable, descending"),
           _t("round", "ties", 7, "torch.round", [tie_halves(rng, (3, 8))], {}, "halves: round half to even",
              integer_valued=True)]
    for k, (kw, side, note) in enumerate(_TORCH_NEAREST, start=8):
        x = rng.standard_normal((1, 2, side, side))
        out.append(_t(f"nn.functional.interpolate.{kw['mode']}", "ties", k, "torch.nn.functional.interpolate", [x],
                      kw, note))
    return out


def _ties_onnx(seed: int) -> list[Case]:
    from onnx import TensorProto
    rng = _rng(seed, "ties", "onnx")
    m = _tie_matrix(rng, 4, 6).astype(np.float32)
    i64 = [TensorProto.INT64]
    out, k = [], 0
    for op in ("ArgMax", "ArgMin"):
        for last in (0, 1):
            feeds = {"X": m}
            attrs = dict(axis=1, keepdims=1, select_last_index=last)
            out.append(_o(op, "ties", k, _one_node(op, ["X"], attrs, feeds, types=i64), feeds, _kw(attrs)))
            k += 1
    feeds = {"X": np.ascontiguousarray(_tie_matrix(rng, 4, 6).T.astype(np.float32))}
    out.append(_o("ArgMax", "ties", k, _one_node("ArgMax", ["X"], {"axis": 0}, feeds, types=i64), feeds, "axis=0"))
    k += 1
    for largest in (1, 0):
        feeds = {"X": m}
        attrs = dict(axis=-1, largest=largest, sorted=1)
        model = _one_node("TopK", ["X", "K"], attrs, feeds, [_i64("K", [3])], ("Values", "Indices"),
                          [TensorProto.FLOAT, TensorProto.INT64])
        out.append(_o("TopK", "ties", k, model, feeds, _kw(attrs) + " K=3 (lower index first)"))
        k += 1
    feeds = {"X": tie_halves(rng, (3, 8)).astype(np.float32)}
    out.append(_o("Round", "ties", k, _one_node("Round", ["X"], {}, feeds), feeds, "halves: half to even",
                  integer_valued=True))
    k += 1
    for coord, side, scales, sizes in _NEAREST:
        x = rng.standard_normal((1, 1, side, side)).astype(np.float32)
        for mode in _NEAREST_MODES:
            feeds = {"X": x}
            attrs = dict(mode="nearest", coordinate_transformation_mode=coord, nearest_mode=mode)
            if scales is not None:
                const = [_f32("scales", scales)]
                ins = ["X", "", "scales"]
            else:
                const = [_i64("sizes", sizes)]
                ins = ["X", "", "", "sizes"]
            model = _one_node("Resize", ins, attrs, feeds, const)
            out.append(_o("Resize", "ties", k, model, feeds, _kw(attrs) + f" scales={scales} sizes={sizes}"))
            k += 1
    return out


def _f32(name: str, values: list) -> Any:
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def picks(x, op: str, dim: int, **kwargs):
    """An index-returning selection's values and the input at its indices: where the spec leaves a tie's index open
    (topk, kthvalue, median, mode, cummax, unstable sort), every index it allows picks the same values, so the case
    has one answer and still reaches the backend's index path (an index off the selected element picks another)."""
    import torch

    from fpdiff.analysis.ops.torch_catalog import resolve
    values, indices = resolve(op)(x, dim=dim, **kwargs)
    if values.dim() < x.dim():  # a reduction without keepdim: gather wants the reduced dim back
        values, indices = values.unsqueeze(dim), indices.unsqueeze(dim)
    return values, torch.gather(x, dim, indices)


def pool_picks(x, kernel_size: int, stride: int, padding: int = 0):
    """max_pool2d's values and the input at its indices (flat per channel, as the op defines them): one answer
    whichever of a window's tied maxima the backend's index names."""
    import torch.nn.functional as F
    values, indices = F.max_pool2d(x, kernel_size, stride, padding, return_indices=True)
    return values, x.flatten(2).gather(2, indices.flatten(2)).view_as(values)


def _mode_matrix(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Rows on the tie grid whose most frequent value is unique (three times, every other at most twice): mode's
    value has one answer, its index (any of the three) does not, so mode's cases compare picks."""
    levels = np.arange(-TIE_LEVELS, TIE_LEVELS + 1) * TIE_STEP
    out = np.empty((rows, cols))
    for r in range(rows):
        mode, *others = rng.permutation(levels)
        out[r] = rng.permutation(np.concatenate([[mode] * 3, np.repeat(others, 2)[:cols - 3]]))
    return out


_HERE = "fpdiff.analysis.ops.variants"
# selections whose tie index the spec leaves open, as (op, the op picks calls, kwargs, note): each compares picks
_PICKS = [("topk", "torch.topk", {"k": 3}, "k=3"), ("kthvalue", "torch.kthvalue", {"k": 2}, "k=2 (a tied minimum)"),
          ("median", "torch.median", {}, "the lower median"), ("nanmedian", "torch.nanmedian", {}, "the lower median"),
          ("cummax", "torch.cummax", {}, ""), ("cummin", "torch.cummin", {}, ""),
          ("sort", "torch.sort", {"stable": False}, "unstable")]


def _tie_picks_torch(seed: int, start: int) -> list[Case]:
    """Tie cases of the selections whose tie index is open: values and picks, tie-insensitive value reductions."""
    rng = _rng(seed, "ties", "picks")
    m = _tie_matrix(rng, 4, 6)
    out = [_t(op, "ties", start + k, f"{_HERE}.picks", [m], {"op": fn, "dim": 1, **kw},
              f"dim=1{' ' + note if note else ''}: values and the input at the indices (any tied index picks the "
              "same)")
           for k, (op, fn, kw, note) in enumerate(_PICKS)]
    k = start + len(out)
    out.append(_t("mode", "ties", k, f"{_HERE}.picks", [_mode_matrix(rng, 4, 6)], {"op": "torch.mode", "dim": 1},
                  "dim=1, a unique mode three times per row: values and picks"))
    pool = rng.integers(-2, 3, (1, 2, 6, 6)) * TIE_STEP
    out.append(_t("nn.functional.max_pool2d", "ties", k + 1, f"{_HERE}.pool_picks", [pool],
                  {"kernel_size": 3, "stride": 2, "padding": 1}, "return_indices: values and picks, tied maxima"))
    for j, op in enumerate(("amax", "amin", "max.reduction_no_dim", "min.reduction_no_dim")):
        fn, kw = (f"torch.{op[:4]}", {"dim": 1}) if op in ("amax", "amin") else (f"torch.{op[:3]}", {})
        out.append(_t(op, "ties", k + 2 + j, fn, [m], kw, f"{_kw(kw)} tied extremes: one value".strip()))
    return out


def _collisions_torch(seed: int, start: int) -> list[Case]:
    """Scatter reductions with several sources per target, each column's targets repeating: the reduction fixes the
    answer (a plain overwrite, whose winner is undefined, gets none); a catalog sample with one source per target
    makes mean the overwrite and hides the accumulation."""
    rng = _rng(seed, "ties", "collisions")
    x, src = rng.standard_normal((4, 3)), rng.standard_normal((6, 3))
    index = rng.integers(0, 4, (6, 3))  # six sources into four rows: every column repeats a target
    out = []
    for k, (red, own) in enumerate([("sum", False), ("mean", False), ("mean", True), ("amax", False),
                                    ("amin", False), ("prod", True)]):
        kw = {"dim": 0, "reduce": red, "include_self": own}
        out.append(_t(f"scatter_reduce.{red}", "ties", start + k, "torch.scatter_reduce", [x], kw,
                      f"{_kw(kw)}, repeated targets", tensors={"index": index, "src": src}))
    rows = rng.integers(0, 4, 6)
    k = start + len(out)
    out += [_t("scatter_add", "ties", k, "torch.scatter_add", [x], {"dim": 0}, "repeated targets",
               tensors={"index": index, "src": src}),
            _t("index_add", "ties", k + 1, "torch.index_add", [x], {"dim": 0}, f"index {rows.tolist()} repeats",
               tensors={"index": rows, "source": src}),
            _t("index_put", "ties", k + 2, f"{_HERE}.index_put_accumulate", [x, rows, src], {},
               f"accumulate=True, index {rows.tolist()} repeats")]
    return out


def index_put_accumulate(x, rows, values):
    """index_put with accumulate=True on the rows `rows` (its indices argument is a tuple, so not a model input)."""
    return x.index_put((rows,), values, accumulate=True)


def _ties(seed: int) -> list[Case]:
    torch_cases = _ties_torch(seed)
    torch_cases += _tie_picks_torch(seed, len(torch_cases))
    torch_cases += _collisions_torch(seed, len(torch_cases))
    onnx_cases = _ties_onnx(seed)
    onnx_cases += _tie_picks_onnx(seed, len(onnx_cases))
    onnx_cases += _collisions_onnx(seed, len(onnx_cases))
    return torch_cases + onnx_cases


def _tie_picks_onnx(seed: int, start: int) -> list[Case]:
    """ReduceMax/ReduceMin over tied extremes (one value), and MaxPool's values with the input at its Indices
    (Reshape to 1-D, Gather: ORT and the spec index the whole tensor flat), one answer whichever tie it names."""
    from onnx import helper
    rng = _rng(seed, "ties", "picks-onnx")
    m = _tie_matrix(rng, 4, 6).astype(np.float32)
    out = []
    for k, op in enumerate(("ReduceMax", "ReduceMin")):
        feeds = {"X": m}
        model = _one_node(op, ["X", "axes"], {"keepdims": 0}, feeds, [_i64("axes", [1])])
        out.append(_o(op, "ties", start + k, model, feeds, "axes=[1], tied extremes: one value"))
    feeds = {"X": (rng.integers(-2, 3, (1, 2, 6, 6)) * TIE_STEP).astype(np.float32)}
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    nodes = [helper.make_node("MaxPool", ["X"], ["Y_out", "I"], **attrs),
             helper.make_node("Reshape", ["X", "flat"], ["Xf"]), helper.make_node("Gather", ["Xf", "I"], ["P"])]
    model = _graph(nodes, feeds, [_i64("flat", [-1])], ["Y_out", "P"])
    out.append(_o("MaxPool", "ties", start + 2, model, feeds, _kw(attrs) + " Indices: values and the input at the "
                  "indices (any tied index picks the same)"))
    return out


# ONNX scatters with several updates per target, each with the reduction that fixes the answer (none: undefined)
_SCATTER_REDUCTIONS = ("add", "mul", "max", "min")


def _collisions_onnx(seed: int, start: int) -> list[Case]:
    """ScatterElements and ScatterND with repeated targets under each reduction the spec defines for them."""
    rng = _rng(seed, "ties", "collisions-onnx")
    data, upd = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((6, 3)).astype(np.float32)
    index = _i64("idx", rng.integers(0, 4, (6, 3)).tolist())
    rows = _i64("rows", rng.integers(0, 4, (6, 1)).tolist())
    out, k = [], start
    for red in _SCATTER_REDUCTIONS:
        feeds = {"X": data, "U": upd}
        model = _one_node("ScatterElements", ["X", "idx", "U"], {"axis": 0, "reduction": red}, feeds, [index])
        out.append(_o("ScatterElements", "ties", k, model, feeds, f"axis=0 reduction={red}, repeated targets"))
        model = _one_node("ScatterND", ["X", "rows", "U"], {"reduction": red}, feeds, [rows])
        out.append(_o("ScatterND", "ties", k + 1, model, feeds, f"reduction={red}, repeated rows"))
        k += 2
    return out


# ---------------------------------------------------------------------------------------------------------------
# 9. parameters along other axes

AXES_SHAPE = (2, 3, 4, 5)  # N, C, H, W all different: a parameter broadcast along the wrong axis cannot line up


def gather_axis(x, index, dim: int):
    """torch.gather with the index as the model's second input (OpInfo passes dim positionally between them)."""
    import torch
    return torch.gather(x, dim, index)


def cat_axis(x, y, dim: int):
    """torch.cat of two inputs along `dim` (the list argument as two model inputs)."""
    import torch
    return torch.cat([x, y], dim)


# (op, torch callable, parameter shape, note): a per-channel parameter on an axis other than the channel's
_BROADCASTS = [("mul", "torch.mul", (4, 1), "scale (4, 1): along H"), ("add", "torch.add", (1, 1, 1, 5),
               "bias (1, 1, 1, 5): along W"), ("mul", "torch.mul", (3, 1, 1), "scale (3, 1, 1): C without N")]
_AXIS_OPS = [("softmax", "torch.softmax", "Softmax"), ("log_softmax", "torch.log_softmax", "LogSoftmax"),
             ("cumsum", "torch.cumsum", "CumSum")]
_AXES = (0, -2)  # the first axis and the second-to-last: both away from the last one the catalogs favour


def _axes_torch(seed: int) -> list[Case]:
    rng = _rng(seed, "axes", "torch")
    x = rng.standard_normal(AXES_SHAPE)
    out, k = [], 0
    for op, fn, shape, note in _BROADCASTS:
        out.append(_t(op, "axes", k, fn, [x, rng.standard_normal(shape)], {}, note))
        k += 1
    for op, fn, _ in _AXIS_OPS:
        for dim in _AXES:
            out.append(_t(op, "axes", k, fn, [x], {"dim": dim}, f"dim={dim}"))
            k += 1
    here = "fpdiff.analysis.ops.variants"
    out.append(_t("nn.functional.layer_norm", "axes", k, "torch.nn.functional.layer_norm", [x],
                  {"normalized_shape": (4, 5)}, "normalized over H, W: weight and bias (4, 5)",
                  tensors={"weight": rng.standard_normal((4, 5)), "bias": rng.standard_normal((4, 5))}))
    out.append(_t("nn.functional.group_norm", "axes", k + 1, "torch.nn.functional.group_norm",
                  [rng.standard_normal((2, 6, 4, 5))], {"num_groups": 3}, "3 groups of 2 channels, weight and bias (6)",
                  tensors={"weight": rng.standard_normal(6), "bias": rng.standard_normal(6)}))
    out.append(_t("cat", "axes", k + 2, f"{here}.cat_axis", [x, rng.standard_normal((2, 3, 2, 5))], {"dim": -2},
                  "dim=-2"))
    out.append(_t("gather", "axes", k + 3, f"{here}.gather_axis", [x, rng.integers(0, 3, (2, 2, 4, 5))], {"dim": 1},
                  "dim=1"))
    return out


# per-axis quantization: (axis, scales, zero points) with one entry per element of that axis
_PER_AXIS = [(1, [0.02, 0.05, 0.1], [128, 100, 150]), (2, [0.01, 0.03, 0.06, 0.12], [128, 90, 160, 128])]


_ONNX_BROADCASTS = [("Mul", (4, 1), "scale (4, 1): along H"), ("Add", (1, 1, 1, 5), "bias (1, 1, 1, 5): along W"),
                    ("Mul", (3, 1, 1), "scale (3, 1, 1)"), ("PRelu", (4, 1), "slope (4, 1): along H"),
                    ("PRelu", (5,), "slope (5,): along W")]


def _axes_onnx(seed: int) -> list[Case]:
    from onnx import helper, numpy_helper
    rng = _rng(seed, "axes", "onnx")
    x = rng.standard_normal(AXES_SHAPE).astype(np.float32)
    out, k = [], 0

    def add(op: str, model: Any, feeds: dict, note: str) -> None:
        nonlocal k
        out.append(_o(op, "axes", k, model, feeds, note))
        k += 1
    for op, shape, note in _ONNX_BROADCASTS:
        feeds = {"X": x, "P": rng.standard_normal(shape).astype(np.float32)}
        add(op, _one_node(op, ["X", "P"], {}, feeds), feeds, note)
    for _, _, op in _AXIS_OPS:
        for axis in _AXES:
            feeds = {"X": x}
            if op == "CumSum":
                add(op, _one_node(op, ["X", "axis"], {}, feeds, [_i64("axis", axis)]), feeds, f"axis={axis}")
            else:
                add(op, _one_node(op, ["X"], {"axis": axis}, feeds), feeds, f"axis={axis}")
    for axis, other in ((-2, (2, 3, 2, 5)), (0, (1, 3, 4, 5))):
        feeds = {"X": x, "Y": rng.standard_normal(other).astype(np.float32)}
        add("Concat", _one_node("Concat", ["X", "Y"], {"axis": axis}, feeds), feeds, f"axis={axis}")
    for axis, idx in ((1, [2, 0]), (-1, [[4, 0], [1, 1]])):
        feeds = {"X": x}
        add("Gather", _one_node("Gather", ["X", "idx"], {"axis": axis}, feeds, [_i64("idx", idx)]), feeds,
            f"axis={axis} indices={idx}")
    for axis, scales, zeros in _PER_AXIS:
        feeds = {"X": x}
        consts = [_f32("scale", scales), numpy_helper.from_array(np.array(zeros, dtype=np.uint8), "zero")]
        nodes = [helper.make_node("QuantizeLinear", ["X", "scale", "zero"], ["q"], axis=axis),
                 helper.make_node("DequantizeLinear", ["q", "scale", "zero"], ["Y_out"], axis=axis)]
        add("QuantizeLinear", _graph(nodes, feeds, consts, ["Y_out"]), feeds,
            f"per-axis QuantizeLinear -> DequantizeLinear axis={axis}, scales {scales}")
    for axis in (-2, 1):
        shape = AXES_SHAPE[axis:]
        feeds = {"X": x, "S": rng.standard_normal(shape).astype(np.float32),
                 "B": rng.standard_normal(shape).astype(np.float32)}
        add("LayerNormalization", _one_node("LayerNormalization", ["X", "S", "B"], {"axis": axis}, feeds), feeds,
            f"axis={axis}, scale and bias {list(shape)}")
    return out


# C equals W (and, for a (C, 1) parameter, C equals H): a per-channel parameter of length 4 also fits the last axis,
# so the two broadcasting readings (per channel, or numpy's trailing-axis reading of a 1-D parameter) are both valid
# shapes and give different numbers; on AXES_SHAPE the wrong reading fails to compile instead of computing wrongly
ALIASED_SHAPE = (2, 4, 3, 4)
ALIASED_H = (2, 4, 4, 3)
_ALIASED_NOTE = "C = 4 is another axis's length too: both broadcasting readings fit, the spec's alone is right"


def _aliased_torch(seed: int, start: int) -> list[Case]:
    """Per-channel parameters of length C on an input whose W is also C (torch reads them per channel; layer_norm's
    normalized_shape and a (4,) multiplier along W)."""
    rng = _rng(seed, "axes", "aliased-torch")
    x, c = rng.standard_normal(ALIASED_SHAPE), ALIASED_SHAPE[1]

    def vec(positive: bool = False) -> np.ndarray:
        v = rng.standard_normal(c)
        return np.abs(v) + 0.5 if positive else v
    nf = "torch.nn.functional"
    made = [("nn.functional.prelu", f"{nf}.prelu", [x], {}, {"weight": vec()}, "weight (4,): per channel"),
            ("nn.functional.batch_norm", f"{nf}.batch_norm", [x], {"training": False},
             {"running_mean": vec(), "running_var": vec(True), "weight": vec(), "bias": vec()}, "eval, per channel"),
            ("nn.functional.instance_norm", f"{nf}.instance_norm", [x], {}, {"weight": vec(), "bias": vec()},
             "weight and bias (4,): per channel"),
            ("nn.functional.group_norm", f"{nf}.group_norm", [x], {"num_groups": 2}, {"weight": vec(), "bias": vec()},
             "2 groups, weight and bias (4,): per channel"),
            ("nn.functional.layer_norm", f"{nf}.layer_norm", [x], {"normalized_shape": (c,)},
             {"weight": vec(), "bias": vec()}, "normalized_shape (4,): along W"),
            ("nn.functional.conv2d", f"{nf}.conv2d", [rng.standard_normal((2, 3, 5, 6))], {},
             {"weight": rng.standard_normal((4, 3, 3, 3)), "bias": vec()}, "output (2, 4, 3, 4), bias per channel"),
            ("mul", "torch.mul", [x, vec()], {}, None, "scale (4,): along W"),
            ("mul", "torch.mul", [x, vec()[:, None, None]], {}, None, "scale (4, 1, 1): per channel")]
    return [_t(op, "axes", start + k, fn, arrays, kw, f"{note}; {_ALIASED_NOTE}", tensors=tensors)
            for k, (op, fn, arrays, kw, tensors, note) in enumerate(made)]


def _aliased_onnx(seed: int, start: int) -> list[Case]:
    """The ONNX counterparts: PRelu slopes (4,) (along W by numpy broadcasting), (4, 1, 1) (per channel) and (4, 1)
    on an input whose H is 4 (along H), BatchNormalization, InstanceNormalization, LayerNormalization, Mul and a
    Conv bias, each parameter of length C = W."""
    rng = _rng(seed, "axes", "aliased-onnx")
    x = rng.standard_normal(ALIASED_SHAPE).astype(np.float32)

    def vec(*shape: int, positive: bool = False) -> np.ndarray:
        v = rng.standard_normal(shape or (ALIASED_SHAPE[1],)).astype(np.float32)
        return np.abs(v) + np.float32(0.5) if positive else v
    made = [("PRelu", {"X": x, "P": vec()}, {}, "slope (4,): along W"),
            ("PRelu", {"X": x, "P": vec(4, 1, 1)}, {}, "slope (4, 1, 1): per channel"),
            ("PRelu", {"X": rng.standard_normal(ALIASED_H).astype(np.float32), "P": vec(4, 1)}, {},
             "slope (4, 1) on (2, 4, 4, 3): along H"),
            ("BatchNormalization", {"X": x, "S": vec(), "B": vec(), "M": vec(), "V": vec(positive=True)}, {},
             "scale, bias, mean, var (4,): per channel"),
            ("InstanceNormalization", {"X": x, "S": vec(), "B": vec()}, {}, "scale and bias (4,): per channel"),
            ("LayerNormalization", {"X": x, "S": vec(), "B": vec()}, {"axis": -1}, "axis=-1, scale and bias (4,)"),
            ("Mul", {"X": x, "P": vec()}, {}, "scale (4,): along W"),
            ("Conv", {"X": rng.standard_normal((2, 3, 5, 6)).astype(np.float32),
                      "W": rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "B": vec()}, {},
             "output (2, 4, 3, 4), bias (4,) per channel")]
    return [_o(op, "axes", start + k, _one_node(op, list(feeds), attrs, feeds), feeds, f"{note}; {_ALIASED_NOTE}")
            for k, (op, feeds, attrs, note) in enumerate(made)]


def _axes(seed: int) -> list[Case]:
    torch_cases, onnx_cases = _axes_torch(seed), _axes_onnx(seed)
    return (torch_cases + _aliased_torch(seed, len(torch_cases)) + onnx_cases
            + _aliased_onnx(seed, len(onnx_cases)))


# ---------------------------------------------------------------------------------------------------------------
# 10. optional inputs and attribute combinations


def _optional_onnx(seed: int) -> list[Case]:
    rng = _rng(seed, "optional-inputs", "onnx")
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    out, k = [], 0

    def add(op: str, inputs: list[str], attrs: dict, feeds: dict, consts: list, note: str) -> None:
        nonlocal k
        out.append(_o(op, "optional-inputs", k, _one_node(op, inputs, attrs, feeds, consts), feeds,
                      f"{note} {_kw(attrs)}".strip()))
        k += 1
    lo, hi = _f32s("min", -0.5), _f32s("max", 0.7)
    for ins, consts, note in ((["X"], [], "no min, no max"), (["X", "min"], [lo], "min only"),
                              (["X", "", "max"], [hi], "max only (min omitted)"), (["X", "min", "max"], [lo, hi],
                                                                                   "min and max")):
        add("Clip", ins, {}, {"X": x}, consts, note)
    small = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    add("Resize", ["X", "", "scales"], {"mode": "linear"}, {"X": small}, [_f32("scales", [1, 1, 2, 2])],
        "scales [1, 1, 2, 2]")
    add("Resize", ["X", "", "", "sizes"], {"mode": "linear"}, {"X": small}, [_i64("sizes", [1, 2, 6, 6])],
        "sizes [1, 2, 6, 6] (the same geometry as scales)")
    pads = _i64("pads", [0, 0, 1, 2, 0, 0, 2, 1])
    add("Pad", ["X", "pads"], {"mode": "constant"}, {"X": x}, [pads], "no constant_value (0)")
    add("Pad", ["X", "pads", "value"], {"mode": "constant"}, {"X": x}, [pads, _f32s("value", 0.5)],
        "constant_value 0.5")
    add("Pad", ["X", "pads2", "", "axes"], {"mode": "constant"}, {"X": x}, [_i64("pads2", [1, 2]), _i64("axes", [-1])],
        "axes [-1], constant_value omitted")
    scale, bias = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    add("LayerNormalization", ["X", "S"], {"axis": -1}, {"X": x, "S": scale}, [], "scale only (no bias)")
    add("LayerNormalization", ["X", "S", "B"], {"axis": -1}, {"X": x, "S": scale, "B": bias}, [], "scale and bias")
    add("Gather", ["X", "idx"], {"axis": 1}, {"X": x}, [_i64("idx", [-1, -3, 0])], "negative indices [-1, -3, 0]")
    add("GatherElements", ["X", "idx"], {"axis": -1}, {"X": x},
        [_i64("idx", rng.integers(-5, 5, (2, 3, 4, 2)).tolist())], "negative indices in [-5, 4]")
    a, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    add("Gemm", ["A", "B"], {}, {"A": a, "B": b}, [], "no C")
    add("Gemm", ["A", "B", "C"], {"transB": 1, "alpha": 0.5, "beta": 2.0},
        {"A": a, "B": np.ascontiguousarray(b.T), "C": rng.standard_normal(5).astype(np.float32)}, [], "C (5,)")
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    add("Conv", ["X", "W"], {"pads": [1, 1, 1, 1]}, {"X": x, "W": w}, [], "no bias")
    add("Conv", ["X", "W", "B"], {"pads": [1, 1, 1, 1]}, {"X": x, "W": w, "B": rng.standard_normal(4).astype(
        np.float32)}, [], "bias (4,)")
    add("ReduceSum", ["X"], {"keepdims": 0}, {"X": x}, [], "no axes: every axis")
    add("ReduceSum", ["X"], {"noop_with_empty_axes": 1}, {"X": x}, [], "no axes: the identity")
    add("Slice", ["X", "starts", "ends"], {}, {"X": x}, [_i64("starts", [0, 1]), _i64("ends", [2, 3])],
        "no axes, no steps")
    add("Slice", ["X", "starts", "ends", "axes", "steps"], {}, {"X": x},
        [_i64("starts", [-1, 3]), _i64("ends", [-6, 0]), _i64("axes", [-1, 2]), _i64("steps", [-2, -1])],
        "negative steps on axes [-1, 2]")
    add("CumSum", ["X", "axis"], {"exclusive": 1, "reverse": 1}, {"X": x}, [_i64("axis", 1)], "axis=1")
    return out


def _f32s(name: str, value: float) -> Any:
    """A float32 scalar initializer (Clip's min/max, Pad's constant_value)."""
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def _optional_torch(seed: int) -> list[Case]:
    rng = _rng(seed, "optional-inputs", "torch")
    x = rng.standard_normal((2, 3, 4, 5))
    small = rng.standard_normal((1, 2, 3, 3))
    w5 = {"weight": rng.standard_normal(5)}
    made = [("clamp", "torch.clamp", [x], {"min": -0.5}, None, "min only"),
            ("clamp", "torch.clamp", [x], {"max": 0.7}, None, "max only"),
            ("nn.functional.layer_norm", "torch.nn.functional.layer_norm", [x], {"normalized_shape": (5,)}, w5,
             "weight, no bias"),
            ("nn.functional.layer_norm", "torch.nn.functional.layer_norm", [x], {"normalized_shape": (5,)}, None,
             "no weight, no bias"),
            ("nn.functional.linear", "torch.nn.functional.linear", [x], {}, {"weight": rng.standard_normal((6, 5))},
             "no bias"),
            ("nn.functional.interpolate.bilinear", "torch.nn.functional.interpolate", [small],
             {"scale_factor": 2.0, "mode": "bilinear"}, None, "scale_factor=2"),
            ("nn.functional.interpolate.bilinear", "torch.nn.functional.interpolate", [small],
             {"size": (6, 6), "mode": "bilinear"}, None, "size=(6, 6), the geometry of scale_factor=2"),
            ("var", "torch.var", [x], {"dim": 1, "correction": 0}, None, "correction=0"),
            ("std", "torch.std", [x], {"dim": (0, 2), "correction": 2, "keepdim": True}, None, "correction=2"),
            ("nn.functional.normalize", "torch.nn.functional.normalize", [x], {"p": 1.0, "dim": 0}, None, "p=1"),
            ("logsumexp", "torch.logsumexp", [x], {"dim": (0, 2), "keepdim": True}, None, "two dims"),
            ("nn.functional.conv2d", "torch.nn.functional.conv2d", [x], {"padding": "same", "dilation": 2},
             {"weight": rng.standard_normal((4, 3, 3, 3))}, "no bias, padding='same', dilation=2")]
    return [_t(op, "optional-inputs", k, fn, arrays, kw, f"{_kw(kw)} ({note})", tensors=tensors)
            for k, (op, fn, arrays, kw, tensors, note) in enumerate(made)]


# the loss cases' targets: classes repeat (2 three times) and differ in weight, so a weighted mean divided by the
# count of targets (6) instead of the sum of their weights is wrong; ignoring class 2 still leaves three targets
LOSS_TARGETS = [2, 0, 2, 1, 2, 3]
LOSS_CLASSES = 4
LOSS_IGNORE = 2
_WEIGHTED = "mean = sum of weighted terms / sum of the targets' weights"


def log_probs(x: np.ndarray) -> np.ndarray:
    """Log-softmax over axis 1: NLL inputs as a model feeds them, every term of the loss of one sign (no cancellation
    that would make a scalar loss ill-conditioned)."""
    z = x - x.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _loss_weights_torch(seed: int, start: int) -> list[Case]:
    """nll_loss and cross_entropy with class weights under each reduction, ignore_index and label smoothing, and
    logsumexp in its plainest form (one int dim, no keepdim: backends refuse most of the catalog's forms)."""
    rng = _rng(seed, "optional-inputs", "losses")
    x, t = rng.standard_normal((len(LOSS_TARGETS), LOSS_CLASSES)), np.array(LOSS_TARGETS)
    w = {"weight": rng.uniform(0.2, 2.0, LOSS_CLASSES)}
    x3, t3 = log_probs(rng.standard_normal((3, LOSS_CLASSES, 5))), rng.integers(0, LOSS_CLASSES, (3, 5))
    nf = "torch.nn.functional"
    lp = log_probs(x)
    made = [("nll_loss", [lp, t], {"reduction": "mean"}, _WEIGHTED), ("nll_loss", [lp, t], {"reduction": "sum"}, ""),
            ("nll_loss", [lp, t], {"ignore_index": LOSS_IGNORE}, "the ignored targets leave both sums"),
            ("nll_loss", [x3, t3], {"reduction": "mean"}, "(N, C, d) input, " + _WEIGHTED),
            ("cross_entropy", [x, t], {"reduction": "mean"}, _WEIGHTED),
            ("cross_entropy", [x, t], {"ignore_index": LOSS_IGNORE}, "the ignored targets leave both sums"),
            ("cross_entropy", [x, t], {"label_smoothing": 0.1}, "weighted smoothing term")]
    out = [_t(f"nn.functional.{op}", "optional-inputs", start + k, f"{nf}.{op}", arrays, kw,
              f"weight ({LOSS_CLASSES},) {_kw(kw)} {note}".strip(), tensors=w)
           for k, (op, arrays, kw, note) in enumerate(made)]
    out.append(_t("logsumexp", "optional-inputs", start + len(made), "torch.logsumexp", [rng.standard_normal((3, 5))],
                  {"dim": 1}, "dim=1 (one int dim, no keepdim: the plainest form)"))
    return out


def _loss_weights_onnx(seed: int, start: int) -> list[Case]:
    """NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss with weights under mean, sum and ignore_index (and the
    log_prob output), and ReduceLogSumExp in its plainest form."""
    rng = _rng(seed, "optional-inputs", "losses-onnx")
    x = rng.standard_normal((len(LOSS_TARGETS), LOSS_CLASSES))
    common = {"T": np.array(LOSS_TARGETS, dtype=np.int64), "W": rng.uniform(0.2, 2.0, LOSS_CLASSES).astype(np.float32)}
    nll = {"X": log_probs(x).astype(np.float32)} | common
    sce = {"X": x.astype(np.float32)} | common
    made = [("NegativeLogLikelihoodLoss", nll, {"reduction": "mean"}, 1, _WEIGHTED),
            ("NegativeLogLikelihoodLoss", nll, {"reduction": "sum"}, 1, ""),
            ("NegativeLogLikelihoodLoss", nll, {"reduction": "mean", "ignore_index": LOSS_IGNORE}, 1, "ignored"),
            ("SoftmaxCrossEntropyLoss", sce, {"reduction": "mean"}, 1, _WEIGHTED),
            ("SoftmaxCrossEntropyLoss", sce, {"reduction": "mean", "ignore_index": LOSS_IGNORE}, 2, "and log_prob")]
    out = [_o(op, "optional-inputs", start + k, _one_node(op, ["X", "T", "W"], attrs, feeds,
                                                          outputs=("Y_out", "LOG_PROB")[:n]), feeds,
              f"weights ({LOSS_CLASSES},) {_kw(attrs)} {note}".strip())
           for k, (op, feeds, attrs, n, note) in enumerate(made)]
    plain = {"X": rng.standard_normal((3, 5)).astype(np.float32)}
    out.append(_o("ReduceLogSumExp", "optional-inputs", start + len(made),
                  _one_node("ReduceLogSumExp", ["X", "axes"], {"keepdims": 0}, plain, [_i64("axes", [1])]), plain,
                  "axes=[1] keepdims=0 (the plainest form)"))
    return out


def _optional(seed: int) -> list[Case]:
    torch_cases, onnx_cases = _optional_torch(seed), _optional_onnx(seed)
    return (torch_cases + _loss_weights_torch(seed, len(torch_cases)) + onnx_cases
            + _loss_weights_onnx(seed, len(onnx_cases)))


# ---------------------------------------------------------------------------------------------------------------
# 12. integer dtypes

# 2^24: from here on fp32 cannot hold consecutive integers (16777217 rounds to 16777216), so a backend that computes
# an int32 max, clamp or cumsum in fp32 merges neighbours a few apart
INT32_EDGE = 1 << 24
INT_SHAPE = (3, 8)  # rows of 8: a selection along dim 1, a short scan, and room for each dtype's edge values
# per dtype, clamp's bounds inside the values drawn (so both bounds clip something)
_CLAMPS = {"uint8": (100, 200), "int8": (-100, 100), "int32": (INT32_EDGE - 2, INT32_EDGE + 2)}


def int_inputs(rng: np.random.Generator, dtype: str) -> np.ndarray:
    """A (3, 8) input at its dtype's edges: uint8 across 128 (read as int8, 200 sorts below 3), int8 at -128 and 127
    (wrap and saturation), int32 within a few of 2^24 (fp32 arithmetic merges neighbours there)."""
    if dtype == "uint8":
        x = rng.integers(0, 256, INT_SHAPE)
        x[0, :4] = [0, 255, 127, 128]
    elif dtype == "int8":
        x = rng.integers(-128, 128, INT_SHAPE)
        x[0, :4] = [-128, 127, -1, 0]
    else:
        x = INT32_EDGE + rng.integers(-4, 5, INT_SHAPE)
    return x.astype(dtype)


_INT_DTYPES = ("uint8", "int8", "int32")
# (op, callable, kwargs, a second input?, dtypes): selections at every dtype; sort, topk (its picks: a tied index is
# open) and cumsum (torch sums integers into int64) at the two whose edges differ most
_INT_TORCH = [("amax", "torch.amax", {"dim": 1}, False, _INT_DTYPES),
              ("amin", "torch.amin", {"dim": 1}, False, _INT_DTYPES),
              ("max.reduction_with_dim", "torch.max", {"dim": 1}, False, _INT_DTYPES),
              ("argmax", "torch.argmax", {"dim": 1}, False, _INT_DTYPES),
              ("maximum", "torch.maximum", {}, True, _INT_DTYPES),
              ("minimum", "torch.minimum", {}, True, _INT_DTYPES),
              ("clamp", "torch.clamp", {}, False, _INT_DTYPES),
              ("sort", "torch.sort", {"dim": 1, "stable": True}, False, ("uint8", "int32")),
              ("topk", f"{_HERE}.picks", {"op": "torch.topk", "dim": 1, "k": 3}, False, ("uint8", "int32")),
              ("cumsum", "torch.cumsum", {"dim": 1}, False, ("uint8", "int32"))]


def _int_torch(seed: int) -> list[Case]:
    """Each op of _INT_TORCH on integer inputs of its dtypes, kept in their dtype."""
    out = []
    for op, fn, kw, pair, dtypes in _INT_TORCH:
        for dtype in dtypes:
            rng = _rng(seed, "int-dtypes", op, dtype)
            arrays = [int_inputs(rng, dtype)] + ([int_inputs(rng, dtype)] if pair else [])
            kwargs = dict(zip(("min", "max"), _CLAMPS[dtype])) if op == "clamp" else kw
            out.append(_t(op, "int-dtypes", len(out), fn, arrays, kwargs, f"{dtype} {_kw(kwargs)}".strip(),
                          exact=True))
    return out


# (op_type, a second input?, attributes, dtypes): ONNX Runtime's CPU kernels cover fewer integer types than the spec
# (a refusal is `unsupported`, a verdict of its own); CumSum's spec has no 8-bit type
_INT_ONNX = [("ReduceMax", False, {"keepdims": 0}, _INT_DTYPES), ("ReduceMin", False, {"keepdims": 0}, _INT_DTYPES),
             ("ArgMax", False, {"axis": 1}, _INT_DTYPES), ("Max", True, {}, _INT_DTYPES),
             ("Min", True, {}, _INT_DTYPES),
             ("Clip", False, {}, _INT_DTYPES), ("TopK", False, {"axis": 1}, ("uint8", "int32")),
             ("CumSum", False, {}, ("int32",))]


def _int_onnx_node(op: str, dtype: str, feeds: dict, attrs: dict) -> Any:
    """The one-node graph of an _INT_ONNX op on `feeds`, its constants (axes, bounds, K) in the input's dtype."""
    from onnx import TensorProto, helper, numpy_helper
    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    if op in ("ReduceMax", "ReduceMin"):
        return _one_node(op, ["X", "axes"], attrs, feeds, [_i64("axes", [1])], types=[kind])
    if op == "Clip":
        bounds = [numpy_helper.from_array(np.array(b, dtype=dtype), n) for n, b in zip(("lo", "hi"), _CLAMPS[dtype])]
        return _one_node(op, ["X", "lo", "hi"], attrs, feeds, bounds, types=[kind])
    if op == "TopK":
        return _one_node(op, ["X", "K"], attrs, feeds, [_i64("K", [3])], ("Values", "Indices"),
                         [kind, TensorProto.INT64])
    if op == "CumSum":
        return _one_node(op, ["X", "axis"], attrs, feeds, [_i64("axis", 1)], types=[kind])
    return _one_node(op, list(feeds), attrs, feeds, types=[TensorProto.INT64 if op == "ArgMax" else kind])


def _int_onnx(seed: int) -> list[Case]:
    out = []
    for op, pair, attrs, dtypes in _INT_ONNX:
        for dtype in dtypes:
            rng = _rng(seed, "int-dtypes", op, dtype)
            # CumSum: 2^22 each, so the running sums pass 2^24 (fp32 drops odd values there) and stay in int32
            x = int_inputs(rng, dtype) // (4 if op == "CumSum" else 1)
            feeds = {"X": x} | ({"Y": int_inputs(rng, dtype)} if pair else {})
            bounds = f" min={_CLAMPS[dtype][0]} max={_CLAMPS[dtype][1]}" if op == "Clip" else ""
            out.append(_o(op, "int-dtypes", len(out), _int_onnx_node(op, dtype, feeds, attrs), feeds,
                          f"{dtype} {_kw(attrs)}{bounds}".strip()))
    return out


def _int_dtypes(seed: int) -> list[Case]:
    return _int_torch(seed) + _int_onnx(seed)


# ---------------------------------------------------------------------------------------------------------------
# 11. deeper samples

# kept per op past a trivial first sample: one more sample reaches the op's rank >= 2 paths (a reduction's axis, a
# broadcast) at one case per such op. It is what the default adds instead of a second sample per op: 299 of the 745
# ops kept have a trivial first sample (torch 269 of 585, ONNX 30 of 160), so it adds 40% of the sample cases where
# --samples 2 adds 100%, and every case it adds is one a first sample missed
DEEP_SAMPLES = 1
# a sample is trivial when no float input has rank >= 2 and this many elements: a scalar or a short vector never
# reaches the axis and tiling code of a kernel
NONTRIVIAL_ELEMENTS = 4


def nontrivial(case: Case) -> bool:
    """Some float input of the case has rank >= 2 and NONTRIVIAL_ELEMENTS elements or more."""
    if case.catalog == TORCH_CATALOG:
        arrays = [(t.dim(), t.numel()) for t in _tensor_leaves(case.payload) if _is_float(t)]
    else:
        arrays = [(np.ndim(a), np.size(a)) for a in case.payload.inputs.values() if np.asarray(a).dtype.kind == "f"]
    return any(r >= 2 and n >= NONTRIVIAL_ELEMENTS for r, n in arrays)


def _fits(case: Case) -> bool:
    """A deeper sample worth a case: non-trivial, and within MAX_ELEMENTS (a size bug shows at the tail)."""
    if case.catalog == TORCH_CATALOG:
        total = sum(t.numel() for t in _tensor_leaves(case.payload))
    else:
        total = sum(int(np.size(a)) for a in case.payload.inputs.values())
    return nontrivial(case) and total <= MAX_ELEMENTS


def _deep(case: Case, seed: int) -> list[Case]:
    """Up to DEEP_SAMPLES other samples of an op whose kept sample is trivial: the ones with the most dims first."""
    if nontrivial(case):
        return []
    from fpdiff.analysis.ops.catalog import deeper
    out = []
    for k, other in enumerate(deeper(case, DEEP_SAMPLES, seed, _fits)):
        out.append(dataclasses.replace(other, case_id=f"{case.case_id}~deep-samples-{k}", variant="deep-samples",
                                       description=f"deep-samples: {other.case_id} ({case.case_id} is trivial): "
                                                   f"{other.description}"))
    return out


# ---------------------------------------------------------------------------------------------------------------
# the registry


def _v(name: str, doc: str, derive: Callable | None = None, extra: Callable | None = None,
       per_op: bool = False) -> tuple[str, Variant]:
    return name, Variant(name, doc, derive, extra, per_op)


VARIANTS: dict[str, Variant] = dict([
    _v("channels-last", "rank-4/5 float inputs in channels-last memory: backends pick other kernels (NHWC convs and "
       "pools) and other loop orders for them, and a stride mix-up only shows there", _channels_last),
    _v("transposed", "rank >= 2 float inputs as transposed non-contiguous views: an op that assumes contiguous "
       "strides, or a lowering that folds the transpose wrongly, reads the wrong elements", _transposed),
    _v("odd-sizes", "the last dim made 7, 63, 65, 127: a vectorized kernel's tail loop (sizes just off 8, 64, 128 "
       "lanes) is separate code, often the one with the bug", _odd_sizes, per_op=True),
    _v("long-reduction", "sums, means, norms, softmaxes, cumsum and matmul over 4096 and 16384 all-positive terms: "
       "a low-precision accumulator stalls there (fp16 cannot add a term < 1 to 2048)", extra=_long_reduction),
    _v("dynamic", "every dim of size >= 2 dynamic through export (ONNX: symbolic dims): dynamic-shape codegen takes "
       "other paths (no static tiling, runtime tails) than the static one the catalog tests; check's grid runs the "
       "torch case static, dynamic and mixed (SEEDS #2), each mix exporting with the declared ranges (a declaration "
       "export refuses in one is a skip with its reason)", _dynamic, per_op=True),
    _v("mixed", "each mix of static and dynamic dims its own case (SEEDS #2: a scatter/one_hot router right all-static "
       "and all-dynamic, wrong with one dim static and the other dynamic): every proper subset of the first 3 dims "
       "dynamic, the rest static; at most 6 cases per op, each its own export (ONNX: symbolic dims, which check's "
       "grid does not mix)", _mixed, per_op=True),
    _v("pool-ceil", "avg/max pooling with ceil_mode, padding, count_include_pad and dilation where the last window "
       "hangs off the edge: frameworks disagree on that window's divisor and existence", extra=_pool_ceil),
    _v("antialias", "bilinear/bicubic resize with antialias, both align_corners, down- and upscaling: antialias "
       "widens the filter on downscale, a path few backends implement or test", extra=_antialias),
    _v("grid-outside", "grid_sample with points outside [-1, 1] under every padding mode and align_corners: the "
       "edge rules (zeros, border, reflection) are where implementations part", extra=_grid_outside),
    _v("pad-modes", "pad in every mode (constant, reflect, replicate/edge, circular/wrap): index arithmetic per mode, "
       "each a separate kernel or lowering", extra=_pad_modes),
    _v("near-max", "float inputs near fp16's max (32752) where the exact output stays in range: a backend whose "
       "intermediates (a square, an exponential, a running sum) stay in fp16 overflows", _near_max_case, per_op=True),
    _v("tiny", "float inputs among fp16's subnormals (6e-8..1e-5): a backend that flushes subnormals to zero or "
       "underflows an intermediate loses every digit there", _tiny_case, per_op=True),
    _v("positive", "float inputs |x| + 0.01: sums without cancellation (the error is the kernel's) and domain ops "
       "(log, sqrt, pow) on their whole domain", _positive_case, per_op=True),
    _v("quantize-int", "a quantize-to-uint8 then max/min then dequantize path inside a float model: rounding x / "
       "scale in low precision, or with another tie rule, flips codes", extra=_quantize_int),
    _v("ties", "exact repeats, only where the answer is unique: the spec fixes the winner (argmax/argmin/max(dim): "
       "first index; stable sort; round half to even; ONNX TopK: lower index; Resize nearest at exact .5 "
       "coordinates), the value is the same whoever wins (amax/amin, max without dim, maximum, ReduceMax/ReduceMin, "
       "Max/Min), or the index is open and the case compares the input at it (topk, kthvalue, median, mode, "
       "cummax/cummin, unstable sort, max_pool2d and MaxPool indices); and scatter/index_add/index_put and "
       "ScatterElements/ScatterND reductions with several sources per target (never a plain overwrite): a backend "
       "with another tie rule, or an index off the selected element, or a lost accumulation, is wrong",
       _ties_case, extra=_ties),
    _v("axes", "per-channel parameters and axis attributes off the usual axis (a scale (4, 1) or bias (1, 1, 1, 5) "
       "on NCHW, PRelu slopes along H or W, layer/group norm weights, softmax/cumsum/concat/gather on axis 0 or -2, "
       "per-axis QuantizeLinear), and per-channel parameters of length C on an input where C also equals W or H "
       "(PRelu, batch/instance/group/layer norm, a Conv bias, Mul), where both broadcasting readings fit: a "
       "lowering that reads the wrong axis fails to compile on the first and computes wrong numbers on the second",
       extra=_axes),
    _v("optional-inputs", "the optional inputs and attribute combinations a schema allows (Clip without min or max, "
       "Resize by scales or sizes, Pad with and without value or axes, LayerNormalization without bias, negative "
       "Gather indices, Gemm without C; torch kwargs OpInfo never sets; loss class weights with reduction mean, sum "
       "and ignore_index through nll_loss, cross_entropy, NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, "
       "where the mean divides by the targets' summed weights), and logsumexp/ReduceLogSumExp in their plainest "
       "form: each omission is its own importer path, and an op some route refuses in the catalog's form is tried "
       "in one it takes", extra=_optional),
    _v("int-dtypes", "ops at their integer dtypes (uint8 across 128, int8 at -128 and 127, int32 near 2^24): "
       "amax/amin, max(dim), argmax, maximum/minimum, clamp, sort, topk and cumsum; ONNX ReduceMax/ReduceMin, "
       "ArgMax, Max/Min, Clip, TopK and CumSum: a backend that reads uint8 as int8, saturates or wraps, or computes "
       "integers in fp32 gets another integer (judged exactly: a flip is a flip)", extra=_int_dtypes),
    _v("mixed-index", "the static/dynamic mixes of SEEDS #2 for index ops only (scatter, gather, index_*, take, "
       "one_hot, embedding; ONNX Scatter*, Gather*, OneHot), at the least cost: torch, one case with every dim "
       "dynamic that check's grid runs static, dynamic and in each mix; ONNX, one case per mix", _mixed_index,
       per_op=True),
    _v("deep-samples", "one more sample of an op whose kept sample is trivial (a scalar or a short vector), the one "
       "with the most dims: the first sample of many ops never reaches a kernel's axis and tiling code",
       _deep, per_op=True),
    _v("quantized", "ONNX's quantized ops judged against their exact float64 emulation, at their own format: "
       "QuantizeLinear/DequantizeLinear in int8, uint8, int16, uint16, int4, uint4 and float8 e4m3fn at exact ties, "
       "saturation and zero points at both ends of the range, per axis on every axis and blocked with a ragged last "
       "block; QLinearMatMul and QLinearConv (per tensor, per column and per channel, groups, depthwise) with "
       "requantization multipliers of 8 and 2e-6; MatMulInteger and ConvInteger after DynamicQuantizeLinear; ONNX "
       "Runtime's MatMulNBits at 4 and 8 bits: a kernel that rounds another way, reads a scale along the wrong axis "
       "or loses a small multiplier's bits lands steps from the emulation", extra=_quantized),
    _v("qdq", "each ONNX catalog op quantized as ONNX Runtime's users quantize a model (quantize_static: QDQ, uint8 "
       "activations, int8 weights per channel, MinMax calibrated on the case's own inputs), judged against the "
       "quantized graph's exact emulation and the float op's float64: the QDQ patterns backends fuse into integer "
       "kernels, op by op", _qdq, per_op=True),
    _v("quantize", "each op's first sample quantized by each backend's own quantizer at static int8, as quant does a "
       "model (PT2E's XNNPACKQuantizer for ExecuTorch, X86InductorQuantizer for inductor, ai-edge-quantizer for "
       "LiteRT, ONNX Runtime's quantize_static for ort and iree, NNCF for openvino), calibrated on inputs drawn like "
       "the sample's, judged by quant's three readings (float64, the quantized graph's exact emulation, the backend): "
       "the op as each quantizer wraps it and each backend's integer kernel for it", _by_backend, per_op=True),
    _v("seed3-conv", "SEEDS #3's 1-D conv (NHC input, CHF filter, NHF output, exact values): a lowering that "
       "ignores the implicit transpose between input and filter gives [[3, 4], [0, 0]]", extra=_seed3),
])

# The default keeps a whole-catalog sweep affordable while it reaches the bug classes reports are made of: layouts
# (one case per 4-D/5-D or matrix sample, the most common source of wrong-stride bugs), the three ranges (one case per
# op each), ties (one case per op of the 15 torch and 8 ONNX ops whose tie has one answer, plus 65 purpose-built
# cases), the purpose-built sets (axes 48 cases, optional-inputs 48, int-dtypes 48, the attribute corners a few dozen
# more: about 400 in all, 5% of a whole sweep's cells), deep-samples (one case per op with a trivial first sample,
# 40% of the sample cases: the default's answer to degenerate first samples) and mixed-index (one case per torch
# index op, up to six per ONNX one: about 30 ops). odd-sizes adds four cases per single-input op, dynamic and mixed
# a new export and compile per op (mixed up to six) on every backend: asked for by name.
DEFAULT_VARIANTS: tuple[str, ...] = ("channels-last", "transposed", "near-max", "tiny", "positive", "long-reduction",
                                     "pool-ceil", "antialias", "grid-outside", "pad-modes", "quantize-int",
                                     "seed3-conv", "ties", "axes", "optional-inputs", "int-dtypes", "mixed-index",
                                     "deep-samples")


def select(names: Sequence[str]) -> list[str]:
    """The variant names asked for, checked: "default" and "all" expand, SAMPLE (the catalog's cases, always run)
    adds none, an unknown name is a one-line usage error."""
    out: list[str] = []
    for n in names:
        n = n.strip()
        picked = list(DEFAULT_VARIANTS) if n == "default" else list(VARIANTS) if n == "all" else [n]
        for p in picked:
            if p == SAMPLE or p in out:
                continue
            if p not in VARIANTS:
                raise UsageError(f"unknown variant {p!r}; known: {', '.join(VARIANTS)} (or default, all, {SAMPLE})")
            out.append(p)
    return out


def expand(cases: list[Case], names: Sequence[str], seed: int = 0, skipped: list[dict] | None = None) -> list[Case]:
    """The catalog cases, then every selected variant's cases derived from them (variant by variant, in catalog
    order). A per-op variant derives from the first case of each op it applies to. A derived case a variant cannot
    build is appended to `skipped` (the catalogs' form: catalog, op, case, reason) unless the op got one."""
    out = list(cases)
    found: list[dict] = []
    for name in select(names):
        v = VARIANTS[name]
        done: set[tuple[str, str]] = set()
        pending: dict[tuple[str, str], list[dict]] = {}
        for case in cases:
            key = (case.catalog, case.op)
            if v.per_op and key in done:
                continue
            got = v.attempt(case, seed)
            made = [c for c in got if isinstance(c, Case)]
            # skips beside made cases (a mix export refuses) stand; a sample that made none waits for the op's next
            notes = [_skip(case, name, e) for e in got if isinstance(e, NotMade)]
            (pending.setdefault(key, []) if v.per_op and not made else found).extend(notes)
            if made and v.per_op:
                done.add(key)
            out += made
        # a per-op variant that made a case of the op from another of its samples skipped nothing
        found += [s for key, notes in pending.items() if key not in done for s in notes]
    if skipped is not None:
        skipped += found
    return out


def _skip(case: Case, name: str, e: NotMade) -> dict:
    return {"catalog": case.catalog, "op": case.op, "case": e.case_id or f"{case.case_id}~{name}",
            "reason": f"{name}: {e.reason}"}


def extra_cases(names: Sequence[str], patterns: Sequence[str] | None, seed: int = 0,
                catalogs: Sequence[str] | None = None) -> list[Case]:
    """The purpose-built cases of the selected variants whose op matches `patterns` (None: all), in `catalogs`
    (None: both)."""
    out: list[Case] = []
    for name in select(names):
        v = VARIANTS[name]
        if v.extra is None:
            continue
        out += [c for c in v.extra(seed) if (patterns is None or matches(c.op, list(patterns)))
                and (catalogs is None or c.catalog in catalogs)]
    return out
