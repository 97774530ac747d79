"""Variants the catalogs lack, made on purpose. A catalog gives an op on the inputs its authors thought of; a backend
bug often lives in one variant only: a memory layout, a size around a vector width, a dynamic dim, an attribute
combination, a range of values, an integer path, one conv layout (SEEDS #3). Each generator here is one Variant:
`apply(case)` derives cases from a catalog case (or none), `extra()` builds purpose-made cases that need none.
`expand` and `extra_cases` are what the sweep calls; `--variants NAME,...` selects them by name."""
from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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
        if self.derive is None or case.variant != SAMPLE:
            return []
        return self.derive(case, seed)


# ---------------------------------------------------------------------------------------------------------------
# shared helpers


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
    """A case's float64 outputs."""
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


def _dims_torch(case: Case, mixed: bool) -> tuple | None:
    """Per tensor leaf, the dims to export as dynamic; None when the variant does not apply."""
    leaves = _tensor_leaves(case.payload)
    if not leaves:
        return None
    batch = leaves[0].shape[0] if leaves[0].dim() >= 2 else None
    dyn = []
    for t in leaves:
        # torch.export specializes dims of size 0 and 1 (a 1 broadcasts, so it becomes a constant): they stay static
        if mixed:  # the batch dim of every input that shares the first input's batch, the rest static
            dyn.append((0,) if batch is not None and batch >= 2 and t.dim() >= 2 and t.shape[0] == batch else ())
        else:
            dyn.append(tuple(d for d in range(t.dim()) if t.shape[d] >= 2))
    return tuple(dyn) if any(dyn) else None


def _exportable(sample: TorchSample, wanted: tuple) -> tuple | None:
    """Of the dims wanted dynamic, those torch.export keeps dynamic (the catalog's own Dim.AUTO probe decides, as
    it will when it writes the case); None when it keeps none. A dim the op fixes (layer_norm's normalized_shape, a
    reshape's target) stays static: declared, it would only make the export fail on every backend alike."""
    from fpdiff.analysis.ops.torch_catalog import declare_dims, input_names
    names = input_names(sample)
    kept_by_name = declare_dims(dataclasses.replace(sample, dynamic=wanted), names)
    kept = tuple(tuple(sorted(kept_by_name.get(n, {}))) for n in names)
    return kept if any(kept) else None


def _dims_onnx(model: Any, mixed: bool) -> Any:
    """A copy of the graph with symbolic input dims (every dim, or the batch dim of rank >= 2 inputs); output dims
    become free symbols; None when no input dim changed."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {i.name for i in m.graph.initializer}
    changed = False
    first: int | None = None  # the first input's batch size: inputs sharing it share the "batch" symbol
    for vi in m.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = vi.type.tensor_type.shape.dim
        for i, d in enumerate(dims):
            if not d.HasField("dim_value") or (mixed and (i != 0 or len(dims) < 2)):
                continue
            first = d.dim_value if first is None else first
            # one symbol for equal batch sizes (it says they are equal), its own for any other
            d.dim_param = ("batch" if d.dim_value == first else f"{vi.name}_d0") if mixed else f"{vi.name}_d{i}"
            changed = True
    if not changed:
        return None
    for j, vo in enumerate(m.graph.output):  # a static output shape would contradict inputs that may change
        if vo.type.HasField("tensor_type") and vo.type.tensor_type.HasField("shape"):
            for i, d in enumerate(vo.type.tensor_type.shape.dim):
                d.dim_param = f"out{j}_d{i}"
    del m.graph.value_info[:]
    return m


def _dims(case: Case, name: str) -> list[Case]:
    mixed = name == "mixed"
    note = "batch dim dynamic, the others static" if mixed else "every dim of size >= 2 dynamic"
    if case.catalog == TORCH_CATALOG:
        dyn = _dims_torch(case, mixed)
        dyn = None if dyn is None or case.payload.dynamic else _exportable(case.payload, dyn)
        if dyn is None:
            return []
        return [_derived(case, name, dataclasses.replace(case.payload, dynamic=dyn), f"{note} {list(dyn)}")]
    model = _dims_onnx(case.payload.model, mixed)
    if model is None:
        return []
    return [_derived(case, name, dataclasses.replace(case.payload, model=model), note)]


# ---------------------------------------------------------------------------------------------------------------
# 4. attributes (purpose-built)


def _one_node(op: str, inputs: list[str], attrs: dict, feeds: dict, consts: list | None = None,
              outputs: tuple[str, ...] = ("Y_out",)) -> Any:
    """A one-node graph at OPSET: `feeds` (name -> array) are graph inputs, `consts` initializers."""
    from onnx import helper
    node = helper.make_node(op, inputs, list(outputs), **attrs)
    return _graph([node], feeds, consts or [], outputs)


def _graph(nodes: list, feeds: dict, consts: list, outputs: Sequence[str]) -> Any:
    import onnx
    from onnx import helper
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
           for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in outputs]
    graph = helper.make_graph(nodes, "fpdiff_variant", ins, outs, initializer=consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    # strict inference fills the outputs' types and shapes and refuses a graph whose attributes do not fit
    model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def _t(op: str, name: str, k: int, fn: str, arrays: list[np.ndarray], kwargs: dict, note: str,
       integer_valued: bool = False) -> Case:
    """A purpose-built torch case: `fn` on float64 tensors made of `arrays`, plus baked-in `kwargs`."""
    import torch
    args = tuple(torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in arrays)
    shapes = ", ".join(str(list(a.shape)) for a in args)
    return Case(TORCH_CATALOG, op, f"{op}~{name}-{k}", name, f"{name}: {shapes}, {note}", integer_valued,
                TorchSample(fn, args, dict(kwargs)))


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
       "other paths (no static tiling, runtime tails) than the static one the catalog tests", lambda c, s: _dims(
           c, "dynamic"), per_op=True),
    _v("mixed", "the batch dim dynamic and the others static (SEEDS #2): mixed static/dynamic dims hit code that "
       "neither all-static nor all-dynamic reaches", lambda c, s: _dims(c, "mixed"), per_op=True),
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
    _v("seed3-conv", "SEEDS #3's 1-D conv (NHC input, CHF filter, NHF output, exact values): a lowering that "
       "ignores the implicit transpose between input and filter gives [[3, 4], [0, 0]]", extra=_seed3),
])

# The default keeps a whole-catalog sweep affordable: layouts (one case per 4-D/5-D or matrix sample, the most common
# source of wrong-stride bugs), the three ranges (one case per op each), and the purpose-built sets (a few dozen cases
# in all). odd-sizes adds four cases per single-input op, dynamic and mixed a new export and compile per op on
# every backend: asked for by name.
DEFAULT_VARIANTS: tuple[str, ...] = ("channels-last", "transposed", "near-max", "tiny", "positive", "long-reduction",
                                     "pool-ceil", "antialias", "grid-outside", "pad-modes", "quantize-int",
                                     "seed3-conv")


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


def expand(cases: list[Case], names: Sequence[str], seed: int = 0) -> list[Case]:
    """The catalog cases, then every selected variant's cases derived from them (variant by variant, in catalog
    order). A per-op variant derives from the first case of each op it applies to."""
    out = list(cases)
    for name in select(names):
        v = VARIANTS[name]
        done: set[tuple[str, str]] = set()
        for case in cases:
            if v.per_op and (case.catalog, case.op) in done:
                continue
            made = v.apply(case, seed)
            if made and v.per_op:
                done.add((case.catalog, case.op))
            out += made
    return out


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
