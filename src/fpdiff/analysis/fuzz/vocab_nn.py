"""The vocabulary's model blocks that are more than one kernel's worth of math: attention (scaled_dot_product_attention
fused, with masks and causal, and its unfused form), the norms beyond layer norm (group norm, batch norm in eval, RMS
norm), and the casts models write around a region they want computed in fp32 (`.float()` ... `.to(x.dtype)`, as
Llama's RMSNorm and most attention softmaxes do). A fused attention kernel, a norm's one-pass variance and a cast
that a compiler drops or keeps are where these fail."""
from __future__ import annotations

import math
import random

import numpy as np

from fpdiff.analysis.fuzz.graph import BOOL, FLOAT, TensorType
from fpdiff.analysis.fuzz.opdef import POSITIVE, OpDef, fits, register
from fpdiff.analysis.fuzz.opdef import functional as _F
from fpdiff.analysis.fuzz.opdef import torch_module as _torch

ATTN_MASK = "attn-mask"  # a boolean attention mask whose every row keeps at least one key (generate.py)
TORCH_ONLY = ("torch",)  # a cast region is a torch program's `.float()`; the ONNX form has no such source
HEAD_DIMS = (4, 8, 16, 17)  # head sizes: powers of two, and an odd one (a fused kernel's tail)
SEQ = (1, 3, 7, 16, 17)  # query and key lengths: a single token (decoding), odd and vector-width lengths
NORM_EPS = 1e-5  # torch's and ONNX's default group/batch norm eps: one value both forms compute with
RMS_EPS = 1e-6  # Llama's RMSNorm eps (torch's rms_norm default would be the dtype's epsilon: not one value)


def _transposed_last(b, name: str) -> str:
    r = b.rank(name)
    out = b.node("Transpose", [name], {"perm": list(range(r - 2)) + [r - 1, r - 2]})
    b.ranks[out] = r
    return out


# ---------------------------------------------------------------------------------------------------------------
# attention


def _attn_arg(rng: random.Random, j: int, types: list) -> TensorType | None:
    """Keys and values beside a query: its batch dims, a key length of their own, the query's head size."""
    q = types[0]
    if q is None or q.rank not in (3, 4) or j == 0:
        return None
    k = types[1] if types[1] is not None and types[1].rank == q.rank else None
    s = k.shape[-2] if k is not None else rng.choice(SEQ)
    if j == 1:
        return TensorType(q.shape[:-2] + (s, q.shape[-1]))
    if j == 2:
        return TensorType(q.shape[:-2] + (s, rng.choice(HEAD_DIMS) if rng.random() < 0.3 else q.shape[-1]))
    if j == 3 and k is not None:  # the mask, (L, S): broadcast over batch and heads
        return TensorType((q.shape[-2], s), BOOL)
    return None


def _attn_infer(types: list[TensorType], attrs: dict) -> TensorType:
    q, k, v = types[:3]
    if q.rank not in (3, 4) or k.rank != q.rank or v.rank != q.rank:
        raise ValueError(f"attention takes (B, H, L, E) or (B, L, E) tensors, got {q.shape}, {k.shape}, {v.shape}")
    if k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2]:
        raise ValueError(f"attention batch dims differ: {q.shape}, {k.shape}, {v.shape}")
    if k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
        raise ValueError(f"attention q/k head sizes or k/v lengths differ: {q.shape}, {k.shape}, {v.shape}")
    if len(types) > 3 and (types[3].dtype != BOOL or types[3].shape != (q.shape[-2], k.shape[-2])):
        raise ValueError(f"attention mask {types[3].shape} is not (L, S) = {(q.shape[-2], k.shape[-2])}")
    return TensorType(q.shape[:-1] + (v.shape[-1],))


def _attn_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    try:
        _attn_infer(types, {})
    except ValueError:
        return None
    return {"causal": len(types) == 3 and rng.random() < 0.5}


def _sdpa_torch(q, k, v, mask=None, causal: bool = False):
    return _F().scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)


def _unfused_torch(q, k, v, mask=None, causal: bool = False):
    """Attention as models wrote it before the fused kernel: scores, a -inf fill, softmax, the weighted sum."""
    torch = _torch()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _attn_onnx(b, names: list[str], attrs: dict) -> str:
    """The decomposition ONNX graphs at opset 21 carry (Attention is opset 23): scores, a -inf where masked, softmax,
    the weighted sum; the causal mask built from the run-time lengths (top-left aligned, as torch's is_causal)."""
    q, k, v = names[:3]
    head = b.node("Shape", [q], {"start": -1})
    scale = b.node("Sqrt", [b.node("CastLike", [head, q])])
    scores = b.node("Div", [b.node("MatMul", [q, _transposed_last(b, k)]), scale])
    keep = names[3] if len(names) > 3 else None
    if attrs.get("causal"):
        lengths = b.node("Concat", [b.node("Shape", [q], {"start": -2, "end": -1}),
                                    b.node("Shape", [k], {"start": -2, "end": -1})], {"axis": 0})
        ones = b.node("ConstantOfShape", [lengths], {"value": _one_int()})
        keep = b.node("Cast", [b.node("Trilu", [ones], {"upper": 0})], {"to": _bool_type()})
    if keep is not None:
        minus_inf = b.node("CastLike", [b.const(np.array(-np.inf)), q])
        scores = b.node("Where", [keep, scores, minus_inf])
    return b.node("MatMul", [b.node("Softmax", [scores], {"axis": -1}), v])


def _one_int():
    from onnx import numpy_helper
    return numpy_helper.from_array(np.array([1], dtype=np.int64))


def _bool_type() -> int:
    from onnx import TensorProto
    return TensorProto.BOOL


def _mask_range(j: int, _types: list[TensorType], _attrs: dict) -> str | None:
    return ATTN_MASK if j == 3 else None


for _name, _catalog, _fn, _reason in (
        ("sdpa", ("nn.functional.scaled_dot_product_attention", "Softmax", "MatMul"), _sdpa_torch,
         "the fused attention kernel (flash/memory-efficient/math paths), causal or not"),
        ("attention", ("matmul", "MatMul", "Softmax"), _unfused_torch,
         "attention unfused: the pattern compilers match into their fused kernel, with a -inf fill")):
    register(OpDef(_name, _catalog, 3, _attn_infer, _attn_draw, _fn, _attn_onnx, arg_type=_attn_arg,
                   tags=frozenset({"attention", "matmul", "reduction"}), reason=_reason))
register(OpDef("sdpa_masked", ("nn.functional.scaled_dot_product_attention", "Where", "Softmax"), 4, _attn_infer,
               _attn_draw, _sdpa_torch, _attn_onnx, arg_dtypes=(FLOAT, FLOAT, FLOAT, BOOL), arg_type=_attn_arg,
               arg_range=_mask_range, fresh=(3,), tags=frozenset({"attention", "matmul", "mask"}),
               reason="fused attention with a boolean padding mask (masked keys differ per query)"))

# ---------------------------------------------------------------------------------------------------------------
# norms


def _channels(types: list[TensorType], least: int) -> int:
    x = types[0]
    if x.rank < least:
        raise ValueError(f"needs (N, C, ...) of rank >= {least}, got {x.shape}")
    return x.shape[1]


def _group_norm_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    if types[0].rank < 3:
        return None
    c = types[0].shape[1]
    groups = [g for g in range(1, c + 1) if c % g == 0]
    return {"groups": rng.choice(groups)}


def _group_norm_infer(types: list[TensorType], attrs: dict) -> TensorType:
    c, g = _channels(types, 3), attrs.get("groups")
    if not isinstance(g, int) or g < 1 or c % g:
        raise ValueError(f"{g} groups do not divide {c} channels")
    return TensorType(types[0].shape)


def _group_norm_onnx(b, names: list[str], attrs: dict) -> str:
    """The statistics over (N, groups, rest) and back to x's shape. Not GroupNormalization: opset 21 defines it as a
    function whose statistics are computed in float32 (stash_type), which the float64 judge would compute too."""
    x = names[0]
    grouped = b.node("Concat", [b.node("Shape", [x], {"start": 0, "end": 1}),
                                b.const(np.array([attrs["groups"], -1], dtype=np.int64))], {"axis": 0})
    g = b.node("Reshape", [x, grouped])
    axes = b.const(np.array([-1], dtype=np.int64))
    centered = b.node("Sub", [g, b.node("ReduceMean", [g, axes], {"keepdims": 1})])
    var = b.node("ReduceMean", [b.node("Mul", [centered, centered]), axes], {"keepdims": 1})
    normed = b.node("Div", [centered, b.node("Sqrt", [b.node("Add", [var, b.const(np.array(NORM_EPS))])])])
    return b.node("Reshape", [normed, b.node("Shape", [x])])


def _channel_static(types: list[TensorType], _attrs: dict) -> set[tuple[int, int]]:
    """The channel dim stays static: the groups divide it, and the statistics are as long as it."""
    return {(0, 1)} | {(j, 0) for j in range(1, len(types))}


register(OpDef("group_norm", ("nn.functional.group_norm", "ReduceMean", "Reshape"), 1, _group_norm_infer,
               _group_norm_draw, lambda x, groups: _F().group_norm(x, groups, eps=NORM_EPS), _group_norm_onnx,
               static=_channel_static, tags=frozenset({"reduction", "norm"}),
               reason="statistics over channel groups and space: reshapes around a reduction, one-pass variance"))


def _batch_norm_arg(rng: random.Random, j: int, types: list) -> TensorType | None:
    x = types[0]
    if j in (1, 2) and x is not None and x.rank >= 2:
        return TensorType((x.shape[1],))
    return None


def _batch_norm_infer(types: list[TensorType], _attrs: dict) -> TensorType:
    c = _channels(types, 2)
    if any(t.shape != (c,) for t in types[1:]):
        raise ValueError(f"running statistics must be ({c},), got {[t.shape for t in types[1:]]}")
    return TensorType(types[0].shape)


def _batch_norm_onnx(b, names: list[str], _attrs: dict) -> str:
    ones = b.node("Expand", [b.const(np.ones(1)), b.node("Shape", [names[1]])])
    zeros = b.node("Expand", [b.const(np.zeros(1)), b.node("Shape", [names[1]])])
    return b.node("BatchNormalization", [names[0], ones, zeros, names[1], names[2]], {"epsilon": NORM_EPS})


register(OpDef("batch_norm", ("nn.functional.batch_norm", "BatchNormalization"), 3, _batch_norm_infer,
               fits(_batch_norm_infer),
               lambda x, mean, var: _F().batch_norm(x, mean, var, training=False, eps=NORM_EPS), _batch_norm_onnx,
               domain=("any", "any", POSITIVE), arg_type=_batch_norm_arg, static=_channel_static,
               tags=frozenset({"norm"}), reason="eval batch norm: folded into a neighbouring conv or matmul's "
               "weights by compilers (a rewrite that moves rounding)"))


def _rms_torch(x):
    return _F().rms_norm(x, x.shape[-1:], eps=RMS_EPS)


def _rms_onnx(b, names: list[str], _attrs: dict) -> str:
    """x / sqrt(mean(x^2) + eps) over the last dim (RMSNormalization is opset 23)."""
    x = names[0]
    mean = b.node("ReduceMean", [b.node("Mul", [x, x]), b.const(np.array([-1], dtype=np.int64))], {"keepdims": 1})
    return b.node("Div", [x, b.node("Sqrt", [b.node("Add", [mean, b.const(np.array(RMS_EPS))])])])


def _rank1(types: list[TensorType], _attrs: dict) -> TensorType:
    if types[0].rank < 1:
        raise ValueError("needs rank >= 1")
    return TensorType(types[0].shape)


register(OpDef("rms_norm", ("nn.functional.rms_norm", "ReduceMean", "Sqrt"), 1, _rank1, lambda rng, types: {},
               _rms_torch, _rms_onnx, tags=frozenset({"reduction", "norm"}),
               reason="the norm of every recent language model: a mean of squares fused with its rsqrt epilogue"))

# ---------------------------------------------------------------------------------------------------------------
# casts around an fp32 region (torch programs)


def _rms_fp32(x):
    """Llama's RMSNorm: computed in fp32 whatever the model's dtype, cast back."""
    torch = _torch()
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + RMS_EPS)
    return h.to(x.dtype)


def _softmax_fp32(x, dim: int):
    """An attention softmax computed in fp32 and cast back (`softmax(x, dim, dtype=torch.float32).to(x.dtype)`)."""
    torch = _torch()
    return torch.softmax(x, dim, dtype=torch.float32).to(x.dtype)


def _dim_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    return {"dim": rng.randrange(types[0].rank)} if types[0].rank else None


def _along(types: list[TensorType], attrs: dict) -> TensorType:
    if not isinstance(attrs.get("dim"), int) or not 0 <= attrs["dim"] < types[0].rank:
        raise ValueError(f"dim {attrs.get('dim')!r} out of range for {types[0].shape}")
    return TensorType(types[0].shape)


register(OpDef("rms_norm_fp32", ("nn.functional.rms_norm", "to"), 1, _rank1, lambda rng, types: {}, _rms_fp32,
               None, forms=TORCH_ONLY, tags=frozenset({"reduction", "norm", "cast"}),
               reason="a cast region as Llama writes it: a compiler must keep the fp32 math between the casts"))
register(OpDef("softmax_fp32", ("softmax", "to"), 1, _along, _dim_draw, _softmax_fp32, None, forms=TORCH_ONLY,
               tags=frozenset({"reduction", "cast"}),
               reason="softmax with dtype=float32 then cast back: the upcast a fused kernel may skip"))
