"""The vocabulary's integer, boolean and selection ops: indices and what consumes them (gather, scatter, index_add,
index_put, index_select, embedding, one_hot), masks (where, masked_fill), selection (argmax, topk, sort) and integer
arithmetic (cumsum), with casts from integers and masks back to the graph's float. Where a model's router or
sampler lives (SEEDS.md #2: topk indices scattered into a mask).

Every integer value is exact at every precision, or the judge would see a legitimate flip as a bug: indices are
drawn valid for the dim they index (TensorType.bound), scatter and index_put take indices distinct along their dim
(TensorType.unique, else the winner of a collision is unspecified), and an op that selects by comparing floats
(argmax, topk's indices, argsort) reads a fresh input of values that are distinct along its dim and exact in bf16,
fp16 and fp32 alike (generate.py's distinct range): the same selection at every precision and on every backend."""
from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np

from fpdiff.analysis.fuzz.graph import BOOL, FLOAT, INT64, TensorType
from fpdiff.analysis.fuzz.opdef import OpDef, fits, reduced_shape, register, same_type
from fpdiff.analysis.fuzz.opdef import torch_module as _torch

INDEX, UNIQUE, MASK, DISTINCT = "index", "unique", "mask", "distinct"  # integer/bool/float ranges (generate.py)
TOPK_MAX = 4  # k of topk at most: a router keeps its top 1-2 experts, a sampler its top few
TORCH_ONLY = ("torch",)  # ops ONNX has no single node for at the graph's opset (index_add)


def distinct_range(dim: int) -> str:
    """The range of a selection op's fresh input: distinct along `dim`."""
    return f"{DISTINCT}@{dim}"


def _dim_ok(t: TensorType, dim) -> bool:
    return isinstance(dim, int) and 0 <= dim < t.rank


def _int(t: TensorType) -> None:
    if t.dtype != INT64:
        raise ValueError(f"takes an int64 index, got {t.dtype}")


def _valid_for(idx: TensorType, size: int) -> None:
    """An index whose entries are known valid for a dim of `size`."""
    _int(idx)
    if idx.bound is None or idx.bound > size:
        raise ValueError(f"index bound {idx.bound} not valid for a dim of size {size}")


def _pick_dim(rng: random.Random, ok: Callable[[int], bool], rank: int) -> int | None:
    dims = [d for d in range(rank) if ok(d)]
    return rng.choice(dims) if dims else None


def _first_float(types: list) -> TensorType | None:
    return next((t for t in types if t is not None and t.dtype == FLOAT), None)


# ---------------------------------------------------------------------------------------------------------------
# selection: indices from fresh distinct values, values from anything


def _select_draw(keep: bool, k: bool) -> Callable[[random.Random, list[TensorType]], dict | None]:
    """A dim (and keepdim, k, largest) for a selection over the argument."""
    def draw(rng: random.Random, types: list[TensorType]) -> dict | None:
        x = types[0]
        dim = _pick_dim(rng, lambda d: x.shape[d] >= 2, x.rank)
        if dim is None:
            return None
        attrs: dict = {"dim": dim}
        if keep:
            attrs["keepdim"] = x.rank == 1 or rng.random() < 0.5
        if k:
            attrs["k"] = rng.randint(1, min(TOPK_MAX, x.shape[dim]))
            attrs["largest"] = rng.random() < 0.75
        return attrs
    return draw


def _argmax_infer(types: list[TensorType], attrs: dict) -> TensorType:
    return TensorType(reduced_shape(types, attrs), INT64, bound=types[0].shape[attrs["dim"]])


def _distinct_arg(j: int, _types: list[TensorType], attrs: dict) -> str | None:
    return distinct_range(attrs["dim"]) if j == 0 else None


def _arg_onnx(op_type: str) -> Callable:
    return lambda b, names, attrs: b.node(op_type, names, {"axis": attrs["dim"], "keepdims": int(attrs["keepdim"])})


register(OpDef("argmax", ("argmax", "ArgMax"), 1, _argmax_infer, _select_draw(True, False),
               lambda x, dim, keepdim: _torch().argmax(x, dim=dim, keepdim=keepdim), _arg_onnx("ArgMax"),
               fresh=(0,), arg_range=_distinct_arg, tags=frozenset({"selection", "integer"}),
               reason="an index chosen by comparing floats, then used (a classifier's label, greedy decoding)"))
register(OpDef("argmin", ("argmin", "ArgMin"), 1, _argmax_infer, _select_draw(True, False),
               lambda x, dim, keepdim: _torch().argmin(x, dim=dim, keepdim=keepdim), _arg_onnx("ArgMin"),
               fresh=(0,), arg_range=_distinct_arg, tags=frozenset({"selection", "integer"}),
               reason="the min-side selection path of reduce-and-index kernels"))


def _topk_infer(indices: bool) -> Callable[[list[TensorType], dict], TensorType]:
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        x, dim, k = types[0], attrs.get("dim"), attrs.get("k")
        if not _dim_ok(x, dim) or not isinstance(k, int) or not 1 <= k <= x.shape[dim]:
            raise ValueError(f"topk k={k} dim={dim} does not fit {x.shape}")
        shape = tuple(k if d == dim else s for d, s in enumerate(x.shape))
        return TensorType(shape, INT64, bound=x.shape[dim], unique=dim) if indices else TensorType(shape, FLOAT)
    return infer


def _topk_torch(output: int) -> Callable:
    return lambda x, k, dim, largest: _torch().topk(x, k, dim=dim, largest=largest, sorted=True)[output]


def _topk_onnx(output: int) -> Callable:
    def emit(b, names: list[str], attrs: dict) -> str:
        k = b.const(np.array([attrs["k"]], dtype=np.int64))
        return b.node_outputs("TopK", [names[0], k], 2, {"axis": attrs["dim"], "largest": int(attrs["largest"]),
                                                         "sorted": 1})[output]
    return emit


register(OpDef("topk_values", ("topk", "TopK"), 1, _topk_infer(False), _select_draw(False, True), _topk_torch(0),
               _topk_onnx(0), tags=frozenset({"selection"}),
               reason="partial sort kernels (a router's or sampler's top scores); values are continuous in x"))
register(OpDef("topk_indices", ("topk", "TopK"), 1, _topk_infer(True), _select_draw(False, True), _topk_torch(1),
               _topk_onnx(1), fresh=(0,), arg_range=_distinct_arg, tags=frozenset({"selection", "integer"}),
               reason="a router's expert choice: indices that a scatter or one_hot turns into a mask (SEEDS #2)"))


def _sort_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    attrs = _select_draw(False, False)(rng, types)
    return None if attrs is None else {**attrs, "descending": rng.random() < 0.5}


def _sort_infer(indices: bool) -> Callable[[list[TensorType], dict], TensorType]:
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        x, dim = types[0], attrs.get("dim")
        if not _dim_ok(x, dim):
            raise ValueError(f"dim {dim!r} out of range for {x.shape}")
        return TensorType(x.shape, INT64, bound=x.shape[dim], unique=dim) if indices else TensorType(x.shape, FLOAT)
    return infer


def _sort_onnx(output: int) -> Callable:
    def emit(b, names: list[str], attrs: dict) -> str:
        # TopK over the whole dim is ONNX's sort; its length read at run time, so dynamic dims sort too
        size = b.node("Shape", names, {"start": attrs["dim"], "end": attrs["dim"] + 1})
        return b.node_outputs("TopK", [names[0], size], 2, {"axis": attrs["dim"],
                                                            "largest": int(attrs["descending"]), "sorted": 1})[output]
    return emit


register(OpDef("sort_values", ("sort", "TopK"), 1, _sort_infer(False), _sort_draw,
               # not stable=True: equal keys give equal values either way, and torch.onnx has no export of the
               # stable sort (the campaign kept finding that gap instead of the backends')
               lambda x, dim, descending: _torch().sort(x, dim=dim, descending=descending).values,
               _sort_onnx(0), tags=frozenset({"selection"}),
               reason="sorting networks and radix sorts on low-precision keys; values are continuous in x"))
register(OpDef("argsort", ("argsort", "TopK"), 1, _sort_infer(True), _sort_draw,
               lambda x, dim, descending: _torch().argsort(x, dim=dim, descending=descending),  # keys distinct
               _sort_onnx(1), fresh=(0,), arg_range=_distinct_arg, tags=frozenset({"selection", "integer"}),
               reason="a permutation computed from floats and applied elsewhere (gather by sorted order)"))

# ---------------------------------------------------------------------------------------------------------------
# gathering by index


def _index_like(rng: random.Random, shape: tuple[int, ...], dim: int, size: int, unique: bool) -> TensorType:
    """An index as wide as `shape` (no wider in any dim), `dim` of at most `size` entries when they must be distinct."""
    out = [s if rng.random() < 0.6 else rng.randint(1, s) for s in shape]
    if unique:
        out[dim] = min(out[dim], size)
    return TensorType(tuple(out), INT64, bound=size, unique=dim if unique else None)


def _gather_arg(unique: bool) -> Callable[[random.Random, int, list], TensorType | None]:
    """gather/scatter: the index beside the data (a dim of it), or the data around a given index."""
    def arg_type(rng: random.Random, j: int, types: list) -> TensorType | None:
        x, idx = types[0], types[1]
        if j == 1 and x is not None:
            dim = _pick_dim(rng, lambda d: x.shape[d] >= 2, x.rank)
            return None if dim is None else _index_like(rng, x.shape, dim, x.shape[dim], unique)
        if j == 0 and idx is not None and idx.bound is not None:
            dim = idx.unique if idx.unique is not None else rng.randrange(idx.rank)
            return TensorType(tuple(max(idx.bound, s) if d == dim else s for d, s in enumerate(idx.shape)))
        if j == 2 and idx is not None:  # scatter's source: shaped as its index (ONNX's ScatterElements requires it)
            return TensorType(idx.shape)
        return None
    return arg_type


def _gather_fits(x: TensorType, idx: TensorType, dim, unique: bool) -> None:
    if not _dim_ok(x, dim) or idx.rank != x.rank:
        raise ValueError(f"index {idx.shape} does not fit data {x.shape} at dim {dim}")
    _valid_for(idx, x.shape[dim])
    if any(i > s for d, (i, s) in enumerate(zip(idx.shape, x.shape)) if d != dim):
        raise ValueError(f"index {idx.shape} wider than data {x.shape} outside dim {dim}")
    if unique and (idx.unique != dim or idx.shape[dim] > x.shape[dim]):
        raise ValueError(f"scatter needs indices distinct along dim {dim}")


def _gather_draw(unique: bool) -> Callable[[random.Random, list[TensorType]], dict | None]:
    def draw(rng: random.Random, types: list[TensorType]) -> dict | None:
        x, idx = types[0], types[1]

        def ok(d: int) -> bool:
            try:
                _gather_fits(x, idx, d, unique)
            except ValueError:
                return False
            return True
        dim = _pick_dim(rng, ok, x.rank)
        return None if dim is None else {"dim": dim}
    return draw


def _gather_infer(types: list[TensorType], attrs: dict) -> TensorType:
    _gather_fits(types[0], types[1], attrs.get("dim"), False)
    return TensorType(types[1].shape, FLOAT)


def _index_arg(j: int, types: list[TensorType], _attrs: dict) -> str | None:
    return (UNIQUE if types[j].unique is not None else INDEX) if types[j].dtype == INT64 else None


register(OpDef("gather", ("gather", "GatherElements"), 2, _gather_infer, _gather_draw(False),
               lambda x, idx, dim: _torch().gather(x, dim, idx),
               lambda b, names, attrs: b.node("GatherElements", names, {"axis": attrs["dim"]}),
               arg_dtypes=(FLOAT, INT64), arg_type=_gather_arg(False), arg_range=_index_arg,
               tags=frozenset({"index"}), reason="per-element indexing: a KV-cache or beam gather"))


def _scatter_infer(types: list[TensorType], attrs: dict, unique: bool = True) -> TensorType:
    x, idx, src = types
    _gather_fits(x, idx, attrs.get("dim"), unique)
    if src.shape != idx.shape or src.dtype != FLOAT:
        raise ValueError(f"scatter source {src.shape} is not shaped as its index {idx.shape}")
    return TensorType(x.shape, FLOAT)


def _scatter_onnx(reduction: str) -> Callable:
    return lambda b, names, attrs: b.node("ScatterElements", names, {"axis": attrs["dim"], "reduction": reduction})


register(OpDef("scatter", ("scatter", "ScatterElements"), 3, _scatter_infer, _gather_draw(True),
               lambda x, idx, src, dim: x.scatter(dim, idx, src), _scatter_onnx("none"),
               arg_dtypes=(FLOAT, INT64, FLOAT), arg_type=_gather_arg(True), arg_range=_index_arg,
               tags=frozenset({"index", "scatter"}),
               reason="writes by index: the MoE router's mask (SEEDS #2), shape logic over index and data dims"))
register(OpDef("scatter_add", ("scatter_add", "ScatterElements"), 3,
               lambda types, attrs: _scatter_infer(types, attrs, unique=False), _gather_draw(False),
               lambda x, idx, src, dim: x.scatter_add(dim, idx, src), _scatter_onnx("add"),
               arg_dtypes=(FLOAT, INT64, FLOAT), arg_type=_gather_arg(False), arg_range=_index_arg,
               tags=frozenset({"index", "scatter"}),
               reason="accumulation by index (token counts per expert, histogram-like sums): colliding adds"))


def _vector_index(rng: random.Random, size: int, unique: bool) -> TensorType:
    n = rng.randint(1, size if unique else size + 3)
    return TensorType((n,), INT64, bound=size, unique=0 if unique else None)


def _select_arg(unique: bool) -> Callable[[random.Random, int, list], TensorType | None]:
    """index_select/index_add/index_put: a 1-D index into one dim of the data; their source shaped to match."""
    def arg_type(rng: random.Random, j: int, types: list) -> TensorType | None:
        x = types[0]
        if j == 1 and x is not None:
            dim = 0 if unique else _pick_dim(rng, lambda d: x.shape[d] >= 2, x.rank)
            return None if dim is None or x.shape[dim] < 2 else _vector_index(rng, x.shape[dim], unique)
        if j == 2 and x is not None and types[1] is not None:
            idx = types[1]
            dims = [d for d in range(x.rank) if idx.bound is not None and idx.bound <= x.shape[d]]
            dim = 0 if unique else (rng.choice(dims) if dims else 0)
            return TensorType(tuple(idx.shape[0] if d == dim else s for d, s in enumerate(x.shape)))
        return None
    return arg_type


def _select_fits(x: TensorType, idx: TensorType, dim) -> None:
    if not _dim_ok(x, dim) or idx.rank != 1:
        raise ValueError(f"a 1-D index into dim {dim} of {x.shape}, got {idx.shape}")
    _valid_for(idx, x.shape[dim])


def _index_select_infer(types: list[TensorType], attrs: dict) -> TensorType:
    x, idx = types
    _select_fits(x, idx, attrs.get("dim"))
    return TensorType(tuple(idx.shape[0] if d == attrs["dim"] else s for d, s in enumerate(x.shape)))


def _index_draw(source: bool) -> Callable[[random.Random, list[TensorType]], dict | None]:
    def draw(rng: random.Random, types: list[TensorType]) -> dict | None:
        x, idx = types[0], types[1]

        def ok(d: int) -> bool:
            try:
                out = _index_select_infer([x, idx], {"dim": d})
            except ValueError:
                return False
            return not source or types[2].shape == out.shape
        dim = _pick_dim(rng, ok, x.rank)
        return None if dim is None else {"dim": dim}
    return draw


register(OpDef("index_select", ("index_select", "Gather"), 2, _index_select_infer, _index_draw(False),
               lambda x, idx, dim: _torch().index_select(x, dim, idx),
               lambda b, names, attrs: b.node("Gather", names, {"axis": attrs["dim"]}),
               arg_dtypes=(FLOAT, INT64), arg_type=_select_arg(False), arg_range=_index_arg,
               tags=frozenset({"index"}), reason="rows by index (token selection, beam reorder), repeats allowed"))


def _index_add_infer(types: list[TensorType], attrs: dict) -> TensorType:
    x, idx, src = types
    if _index_select_infer([x, idx], attrs).shape != src.shape:
        raise ValueError(f"index_add source {src.shape} does not fit {x.shape} at dim {attrs.get('dim')}")
    return TensorType(x.shape)


register(OpDef("index_add", ("index_add",), 3, _index_add_infer, _index_draw(True),
               lambda x, idx, src, dim: x.index_add(dim, idx, src), None,
               arg_dtypes=(FLOAT, INT64, FLOAT), arg_type=_select_arg(False), arg_range=_index_arg,
               forms=TORCH_ONLY, tags=frozenset({"index", "scatter"}),
               reason="a MoE combine: expert outputs added back into token rows, repeated indices summed"))


def _index_put_infer(types: list[TensorType], attrs: dict) -> TensorType:
    x, idx, src = types
    if idx.unique != 0:
        raise ValueError("index_put needs distinct indices (a collision's winner is unspecified)")
    return _index_add_infer(types, {"dim": 0})


def _index_put_onnx(b, names: list[str], _attrs: dict) -> str:
    rows = b.node("Unsqueeze", [names[1], b.const(np.array([-1], dtype=np.int64))])
    return b.node("ScatterND", [names[0], rows, names[2]])


register(OpDef("index_put", ("index_put", "ScatterND"), 3, _index_put_infer,
               fits(_index_put_infer),
               lambda x, idx, src: x.index_put((idx,), src), _index_put_onnx,
               arg_dtypes=(FLOAT, INT64, FLOAT), arg_type=_select_arg(True), arg_range=_index_arg,
               tags=frozenset({"index", "scatter"}),
               reason="x[idx] = v: a cache update by position, lowered to scatter with its own shape logic"))


def _embedding_arg(rng: random.Random, j: int, types: list) -> TensorType | None:
    idx, w = types
    if j == 1 and idx is not None and idx.bound is not None:
        return TensorType((idx.bound + rng.choice((0, 0, 3)), rng.choice((4, 8, 16, 17))))
    if j == 0 and w is not None and w.rank == 2:
        return TensorType(tuple(rng.choice((2, 3, 5, 8)) for _ in range(rng.randint(1, 2))), INT64, bound=w.shape[0])
    if j == 0:
        return TensorType((rng.choice((3, 5, 8)),), INT64, bound=rng.choice((7, 16, 33)))
    return None


def _embedding_infer(types: list[TensorType], _attrs: dict) -> TensorType:
    idx, w = types
    if w.rank != 2:
        raise ValueError(f"an embedding table is 2-D, got {w.shape}")
    _valid_for(idx, w.shape[0])
    return TensorType(idx.shape + (w.shape[1],))


register(OpDef("embedding", ("nn.functional.embedding", "Gather"), 2, _embedding_infer,
               fits(_embedding_infer),
               lambda idx, w: _torch().nn.functional.embedding(idx, w),
               lambda b, names, attrs: b.node("Gather", [names[1], names[0]], {"axis": 0}),
               arg_dtypes=(INT64, FLOAT), arg_type=_embedding_arg, arg_range=_index_arg,
               tags=frozenset({"index"}), reason="a table lookup: the first op of every language model"))


def _one_hot_infer(types: list[TensorType], attrs: dict) -> TensorType:
    idx, classes = types[0], attrs.get("classes")
    _int(idx)
    if idx.bound is None or not isinstance(classes, int) or classes < idx.bound:
        raise ValueError(f"one_hot over {classes} classes needs indices below it (bound {idx.bound})")
    return TensorType(idx.shape + (classes,), INT64, bound=2)


def _one_hot_onnx(b, names: list[str], attrs: dict) -> str:
    depth = b.const(np.array(attrs["classes"], dtype=np.int64))
    return b.node("OneHot", [names[0], depth, b.const(np.array([0, 1], dtype=np.int64))], {"axis": -1})


register(OpDef("one_hot", ("nn.functional.one_hot", "OneHot"), 1, _one_hot_infer,
               lambda rng, types: {"classes": types[0].bound} if types[0].bound else None,
               lambda idx, classes: _torch().nn.functional.one_hot(idx, classes),
               _one_hot_onnx, arg_dtypes=(INT64,), arg_range=_index_arg,
               arg_type=lambda rng, j, types: TensorType((rng.choice((3, 5, 8)),), INT64, bound=rng.choice((4, 8))),
               tags=frozenset({"index", "integer"}), reason="a router's expert mask; an index turned into a dense "
               "tensor whose shape comes from an attribute"))

# ---------------------------------------------------------------------------------------------------------------
# integers and masks back to floats; integer arithmetic


def _cast_infer(dtype: str) -> Callable[[list[TensorType], dict], TensorType]:
    def infer(types: list[TensorType], _attrs: dict) -> TensorType:
        if types[0].dtype != dtype or types[1].dtype != FLOAT:
            raise ValueError(f"casts {dtype} to the float of a float tensor")
        return TensorType(types[0].shape)
    return infer


def _cast_arg(rng: random.Random, j: int, types: list) -> TensorType | None:
    """The float whose dtype the cast takes: a size-1 tensor of the value's rank (a model's `.to(x.dtype)`)."""
    if j == 1 and types[0] is not None:
        return TensorType((1,) * max(types[0].rank, 1))
    return None


register(OpDef("to_float", ("to", "CastLike"), 2, _cast_infer(INT64),
               fits(_cast_infer(INT64)),
               lambda i, like: i.to(like.dtype), lambda b, names, attrs: b.node("CastLike", names),
               arg_dtypes=(INT64, FLOAT), arg_type=_cast_arg, tags=frozenset({"cast", "integer"}),
               reason="`.to(x.dtype)` of integers: one_hot or a count back in the model's float"))
register(OpDef("mask_to_float", ("to", "CastLike"), 2, _cast_infer(BOOL),
               fits(_cast_infer(BOOL)),
               lambda m, like: m.to(like.dtype), lambda b, names, attrs: b.node("CastLike", names),
               arg_dtypes=(BOOL, FLOAT), arg_type=_cast_arg, tags=frozenset({"cast", "mask"}),
               reason="an attention or padding mask made a float multiplier"))


def _int_cumsum_infer(types: list[TensorType], attrs: dict) -> TensorType:
    x, dim = types[0], attrs.get("dim")
    _int(x)
    if not _dim_ok(x, dim):
        raise ValueError(f"dim {dim!r} out of range for {x.shape}")
    return TensorType(x.shape, INT64)


def _int_cumsum_onnx(b, names: list[str], attrs: dict) -> str:
    return b.node("CumSum", [names[0], b.const(np.array(attrs["dim"], dtype=np.int64))])


register(OpDef("cumsum_int", ("cumsum", "CumSum"), 1, _int_cumsum_infer,
               lambda rng, types: {"dim": rng.randrange(types[0].rank)} if types[0].rank and types[0].dtype == INT64
               else None, lambda x, dim: _torch().cumsum(x, dim), _int_cumsum_onnx, arg_dtypes=(INT64,),
               tags=frozenset({"integer", "scan"}),
               reason="position ids from a padding mask (mask.cumsum(-1)): an integer scan kernels lower apart"))

# ---------------------------------------------------------------------------------------------------------------
# masks


def _mask_arg(rng: random.Random, j: int, types: list) -> TensorType | None:
    """A mask as wide as the float beside it, or broadcast along some of its dims."""
    x = _first_float(types)
    if j != 0 or x is None:
        return None
    return TensorType(tuple(1 if rng.random() < 0.3 else s for s in x.shape), BOOL)


def _where_infer(types: list[TensorType], attrs: dict) -> TensorType:
    if types[0].dtype != BOOL:
        raise ValueError("where's condition is a mask")
    return same_type(types, attrs)


def _mask_range(j: int, types: list[TensorType], _attrs: dict) -> str | None:
    return MASK if types[j].dtype == BOOL else None


register(OpDef("where", ("where", "Where"), 3, _where_infer,
               fits(_where_infer),
               lambda m, x, y: _torch().where(m, x, y), lambda b, names, attrs: b.node("Where", names),
               arg_dtypes=(BOOL, FLOAT, FLOAT), arg_type=_mask_arg, arg_range=_mask_range,
               tags=frozenset({"mask", "broadcast"}), reason="select by mask with broadcasting: padding and "
               "causal masks, lowered to blends or predicated loads"))

MASK_FILLS = (0.0, -1e4, 1.5)  # zero, a large negative attention fill that fp16 holds, a plain value


def _masked_fill_infer(types: list[TensorType], attrs: dict) -> TensorType:
    x, m = types
    if m.dtype != BOOL or same_type(types, attrs).shape != x.shape:
        raise ValueError(f"masked_fill's mask {m.shape} must broadcast to {x.shape}")
    return TensorType(x.shape)


def _masked_fill_arg(rng: random.Random, j: int, types: list) -> TensorType | None:
    return _mask_arg(rng, 0, [types[0]]) if j == 1 else None


def _masked_fill_onnx(b, names: list[str], attrs: dict) -> str:
    return b.node("Where", [names[1], b.const(np.array(attrs["value"], dtype=np.float64)), names[0]])


register(OpDef("masked_fill", ("masked_fill", "Where"), 2, _masked_fill_infer,
               lambda rng, types: {"value": rng.choice(MASK_FILLS)} if fits(_masked_fill_infer)(rng, types) is not None
               else None,
               lambda x, m, value: x.masked_fill(m, value), _masked_fill_onnx,
               arg_dtypes=(FLOAT, BOOL), arg_type=_masked_fill_arg, arg_range=_mask_range,
               tags=frozenset({"mask"}), reason="an attention mask's fill before a softmax"))
