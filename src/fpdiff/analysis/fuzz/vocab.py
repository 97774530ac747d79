"""The float ops a fuzz graph is drawn from: each names its ops-catalog entries (torch OpInfo name, ONNX op type), how
it types its output from its arguments, which attributes it may take, and how it is written as torch and as ONNX.
Importing this module registers every op of the vocabulary (the integer, selection, attention, norm and cast ops of
vocab_index.py and vocab_nn.py too)."""
from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from fpdiff.analysis.fuzz.graph import FLOAT, TensorType
from fpdiff.analysis.fuzz.opdef import (  # noqa: F401  (re-exported: the vocabulary's names)
    ANY,
    NONZERO,
    POSITIVE,
    UNIT,
    VOCAB,
    OpDef,
    fits,
    reduced_shape,
    register,
    same_type,
)
from fpdiff.analysis.fuzz.opdef import functional as _F
from fpdiff.analysis.fuzz.opdef import torch_module as _torch

# ---------------------------------------------------------------------------------------------------------------
# helpers the definitions share


def _rank_at_least(n: int) -> Callable[[list[TensorType], dict], TensorType]:
    """same_type for one argument of rank >= n."""
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        if types[0].rank < n:
            raise ValueError(f"needs rank >= {n}, got {types[0].shape}")
        return same_type(types, attrs)
    return infer


def _no_attrs(_rng: random.Random, _types: list[TensorType]) -> dict:
    return {}


_broadcasts = fits(same_type)  # no attributes; None when the two shapes do not broadcast




def _unary(name: str, catalog: tuple[str, ...], torch_fn: Callable, onnx_type: str, reason: str,
           domain: str = ANY, integer_valued: bool = False, tags: tuple[str, ...] = ("elementwise",)) -> OpDef:
    """An elementwise op of one argument that is one ONNX node with no attributes."""
    return register(OpDef(name, catalog, 1, same_type, _no_attrs, torch_fn,
                          lambda b, names, attrs: b.node(onnx_type, names), domain=(domain,),
                          integer_valued=integer_valued, reason=reason, tags=frozenset(tags)))


def _binary(name: str, catalog: tuple[str, ...], torch_fn: Callable, onnx_type: str, reason: str,
            domain: tuple[str, ...] = (ANY, ANY)) -> OpDef:
    """An elementwise op of two broadcasting arguments that is one ONNX node."""
    return register(OpDef(name, catalog, 2, same_type, _broadcasts, torch_fn,
                          lambda b, names, attrs: b.node(onnx_type, names), domain=domain, reason=reason,
                          tags=frozenset({"elementwise", "broadcast"})))


# ---------------------------------------------------------------------------------------------------------------
# elementwise, one argument

_unary("relu", ("nn.functional.relu", "Relu"), lambda x: _torch().relu(x), "Relu",
       "the epilogue every conv/matmul fusion absorbs")
_unary("tanh", ("tanh", "Tanh"), lambda x: _torch().tanh(x), "Tanh",
       "a transcendental fused into pointwise kernels (vectorized approximations)")
_unary("sigmoid", ("sigmoid", "Sigmoid"), lambda x: _torch().sigmoid(x), "Sigmoid",
       "rewritten as 1/(1+exp(-x)) or tanh-based forms by fusers")
_unary("exp", ("exp", "Exp"), lambda x: _torch().exp(x), "Exp",
       "overflows first at low precision; fused with reductions into softmax-like patterns")
_unary("log", ("log", "Log"), lambda x: _torch().log(x), "Log",
       "log(exp(x)) and log-sum-exp rewrites", domain=POSITIVE)
_unary("sqrt", ("sqrt", "Sqrt"), lambda x: _torch().sqrt(x), "Sqrt",
       "normalization epilogues; sqrt/div rewritten to rsqrt*mul", domain=POSITIVE)
_unary("abs", ("abs", "Abs"), lambda x: _torch().abs(x), "Abs", "sign-bit tricks in vectorized code")
_unary("neg", ("neg", "Neg"), lambda x: _torch().neg(x), "Neg",
       "folded into neighbouring adds/subs/muls by algebraic simplifiers")
_unary("reciprocal", ("reciprocal", "Reciprocal"), lambda x: _torch().reciprocal(x), "Reciprocal",
       "approximate reciprocal instructions; mul-by-reciprocal rewrites of div", domain=NONZERO)
_unary("sin", ("sin", "Sin"), lambda x: _torch().sin(x), "Sin", "range reduction in vectorized libm")
_unary("cos", ("cos", "Cos"), lambda x: _torch().cos(x), "Cos", "range reduction in vectorized libm")
_unary("erf", ("erf", "Erf"), lambda x: _torch().erf(x), "Erf",
       "polynomial approximations; pattern-matched into gelu")
_unary("round", ("round", "Round"), lambda x: _torch().round(x), "Round",
       "half-to-even ties; an integer step after any upstream rounding difference", integer_valued=True,
       tags=("elementwise", "rounding"))
_unary("floor", ("floor", "Floor"), lambda x: _torch().floor(x), "Floor",
       "an integer step after any upstream rounding difference", integer_valued=True,
       tags=("elementwise", "rounding"))
_unary("sign", ("sign", "Sign"), lambda x: _torch().sign(x), "Sign",
       "sign of a value that may cancel to zero upstream", integer_valued=True, tags=("elementwise", "rounding"))

# ---------------------------------------------------------------------------------------------------------------
# elementwise, two broadcasting arguments

_binary("add", ("add", "Add"), lambda x, y: _torch().add(x, y), "Add",
        "the residual add fusers fold into producers; reassociated by simplifiers")
_binary("sub", ("sub", "Sub"), lambda x, y: _torch().sub(x, y), "Sub",
        "cancellation: an exact difference a rewrite can make inexact")
_binary("mul", ("mul", "Mul"), lambda x, y: _torch().mul(x, y), "Mul",
        "fused multiply-add contraction with a neighbouring add")
_binary("div", ("div.no_rounding_mode", "Div"), lambda x, y: _torch().div(x, y), "Div",
        "rewritten as mul by reciprocal (loses digits)", domain=(ANY, NONZERO))
_binary("maximum", ("maximum", "Max"), lambda x, y: _torch().maximum(x, y), "Max",
        "NaN propagation and clamp pattern matching")
_binary("minimum", ("minimum", "Min"), lambda x, y: _torch().minimum(x, y), "Min",
        "NaN propagation and clamp pattern matching")

# ---------------------------------------------------------------------------------------------------------------
# elementwise with attributes or more than one ONNX node


def _rsqrt_onnx(b, names: list[str], _attrs: dict) -> str:
    return b.node("Reciprocal", [b.node("Sqrt", names)])  # ONNX has no Rsqrt: the pattern a fuser must find


register(OpDef("rsqrt", ("rsqrt", "Sqrt", "Reciprocal"), 1, same_type, _no_attrs,
               lambda x: _torch().rsqrt(x), _rsqrt_onnx, domain=(POSITIVE,),
               reason="a fast approximate-rsqrt instruction in normalization epilogues",
               tags=frozenset({"elementwise"})))

GELU_APPROXIMATIONS = ("none", "tanh")  # both forms torch and ONNX Gelu (opset 20) define


def _gelu_draw(rng: random.Random, _types: list[TensorType]) -> dict:
    return {"approximate": rng.choice(GELU_APPROXIMATIONS)}


def _gelu_infer(types: list[TensorType], attrs: dict) -> TensorType:
    if attrs.get("approximate", "none") not in GELU_APPROXIMATIONS:
        raise ValueError(f"gelu approximate must be one of {GELU_APPROXIMATIONS}")
    return same_type(types, attrs)


register(OpDef("gelu", ("nn.functional.gelu", "Gelu"), 1, _gelu_infer, _gelu_draw,
               lambda x, approximate="none": _F().gelu(x, approximate=approximate),
               lambda b, names, attrs: b.node("Gelu", names, {"approximate": attrs.get("approximate", "none")}),
               reason="the erf/tanh pattern fusers match into one kernel (and its tanh approximation)",
               tags=frozenset({"elementwise"})))
register(OpDef("softplus", ("nn.functional.softplus", "Softplus"), 1, same_type, _no_attrs,
               lambda x: _F().softplus(x), lambda b, names, attrs: b.node("Softplus", names),
               reason="log1p(exp(x)) with a linear branch above 20 (torch) that rewrites must keep",
               tags=frozenset({"elementwise"})))


def _silu_onnx(b, names: list[str], _attrs: dict) -> str:
    return b.node("Mul", [names[0], b.node("Sigmoid", names)])  # Swish is opset 24: the x*sigmoid(x) pattern


register(OpDef("silu", ("nn.functional.silu", "Sigmoid", "Mul"), 1, same_type, _no_attrs,
               lambda x: _F().silu(x), _silu_onnx, reason="x*sigmoid(x): a pattern fused into one kernel",
               tags=frozenset({"elementwise"})))

CLAMP_DECIMALS = 3  # drawn bounds as short decimals: an attribute reads the same in JSON, torch and ONNX


def _clamp_draw(rng: random.Random, _types: list[TensorType]) -> dict:
    lo = round(rng.uniform(-3.0, 0.5), CLAMP_DECIMALS)
    return {"min": lo, "max": round(lo + rng.uniform(0.1, 3.0), CLAMP_DECIMALS)}


def _clamp_infer(types: list[TensorType], attrs: dict) -> TensorType:
    if not float(attrs["min"]) <= float(attrs["max"]):
        raise ValueError(f"clamp min {attrs['min']} > max {attrs['max']}")
    return same_type(types, attrs)


def _clamp_onnx(b, names: list[str], attrs: dict) -> str:
    import numpy as np
    return b.node("Clip", [names[0], b.const(np.float64(attrs["min"])), b.const(np.float64(attrs["max"]))])


register(OpDef("clamp", ("clamp", "Clip"), 1, _clamp_infer, _clamp_draw,
               lambda x, min, max: _torch().clamp(x, min=min, max=max), _clamp_onnx,
               reason="bounds folded into neighbouring max/min and relu6-style patterns",
               tags=frozenset({"elementwise"})))

POW_EXPONENTS = (2, 3)  # small integer powers: strength-reduced to multiplies; defined on every float input


def _pow_draw(rng: random.Random, _types: list[TensorType]) -> dict:
    return {"exponent": rng.choice(POW_EXPONENTS)}


def _pow_infer(types: list[TensorType], attrs: dict) -> TensorType:
    if attrs.get("exponent") not in POW_EXPONENTS:
        raise ValueError(f"pow exponent must be one of {POW_EXPONENTS}")
    return same_type(types, attrs)


def _pow_onnx(b, names: list[str], attrs: dict) -> str:
    import numpy as np
    return b.node("Pow", [names[0], b.const(np.float64(attrs["exponent"]))])


register(OpDef("pow", ("pow", "Pow"), 1, _pow_infer, _pow_draw,
               lambda x, exponent: _torch().pow(x, exponent), _pow_onnx,
               reason="x**k strength-reduced to multiplies by simplifiers", tags=frozenset({"elementwise"})))

# ---------------------------------------------------------------------------------------------------------------
# reductions


def _dim_draw(keepdim: bool) -> Callable[[random.Random, list[TensorType]], dict | None]:
    """A dim of the argument (and keepdim, when the op takes it); None for a rank-0 argument."""
    def draw(rng: random.Random, types: list[TensorType]) -> dict | None:
        rank = types[0].rank
        if rank < 1:
            return None
        attrs: dict[str, Any] = {"dim": rng.randrange(rank)}
        if keepdim:  # a rank-1 argument keeps its dim: rank-0 values would fit few ops after it
            attrs["keepdim"] = rank == 1 or rng.random() < 0.5
        return attrs
    return draw


def _dim_of(types: list[TensorType], attrs: dict) -> int:
    rank, dim = types[0].rank, attrs.get("dim")
    if not isinstance(dim, int) or not 0 <= dim < rank:
        raise ValueError(f"dim {dim!r} out of range for shape {types[0].shape}")
    return dim


def _reduce_infer(types: list[TensorType], attrs: dict) -> TensorType:
    return TensorType(reduced_shape(types, attrs), FLOAT)


def _along_infer(types: list[TensorType], attrs: dict) -> TensorType:
    _dim_of(types, attrs)
    return TensorType(types[0].shape, FLOAT)


def _reduce(name: str, catalog: tuple[str, ...], torch_name: str, onnx_type: str, reason: str) -> OpDef:
    import numpy as np

    def torch_fn(x, dim, keepdim):
        return getattr(_torch(), torch_name)(x, dim=dim, keepdim=keepdim)

    def onnx_fn(b, names, attrs):
        axes = b.const(np.array([attrs["dim"]], dtype=np.int64))
        return b.node(onnx_type, [names[0], axes], {"keepdims": int(bool(attrs["keepdim"]))})
    return register(OpDef(name, catalog, 1, _reduce_infer, _dim_draw(True), torch_fn, onnx_fn, reason=reason,
                          tags=frozenset({"reduction"})))


_reduce("sum", ("sum", "ReduceSum"), "sum", "ReduceSum",
        "a reduction tiled across a fused elementwise producer (vector tails, split accumulators)")
_reduce("mean", ("mean", "ReduceMean"), "mean", "ReduceMean", "sum then divide: the divide folded or reordered")
_reduce("amax", ("amax", "ReduceMax"), "amax", "ReduceMax", "max-reduction tails and NaN propagation")


def _softmax_onnx(onnx_type: str) -> Callable:
    return lambda b, names, attrs: b.node(onnx_type, names, {"axis": attrs["dim"]})


register(OpDef("softmax", ("softmax", "Softmax"), 1, _along_infer, _dim_draw(False),
               lambda x, dim: _torch().softmax(x, dim), _softmax_onnx("Softmax"),
               reason="max, exp, sum, divide fused into one online kernel", tags=frozenset({"reduction"})))
register(OpDef("log_softmax", ("log_softmax", "LogSoftmax"), 1, _along_infer, _dim_draw(False),
               lambda x, dim: _torch().log_softmax(x, dim), _softmax_onnx("LogSoftmax"),
               reason="x - max - log(sum(exp)): cancellation a fused kernel may reorder",
               tags=frozenset({"reduction"})))

LAYER_NORM_EPS = 1e-5  # torch's and ONNX's default: one value both forms compute with


def _layer_norm_onnx(b, names: list[str], _attrs: dict) -> str:
    import numpy as np
    # LayerNormalization requires a scale: ones as wide as the last dim, shaped at run time (dynamic dims work)
    width = b.node("Shape", names, {"start": -1})
    scale = b.node("Expand", [b.const(np.ones(1, dtype=np.float64)), width])
    return b.node("LayerNormalization", [names[0], scale], {"axis": -1, "epsilon": LAYER_NORM_EPS})


register(OpDef("layer_norm", ("nn.functional.layer_norm", "LayerNormalization"), 1, _rank_at_least(1), _no_attrs,
               lambda x: _F().layer_norm(x, x.shape[-1:], eps=LAYER_NORM_EPS), _layer_norm_onnx,
               reason="mean and variance reductions fused with the normalizing epilogue",
               tags=frozenset({"reduction", "norm"})))


def _cumsum_onnx(b, names: list[str], attrs: dict) -> str:
    import numpy as np
    return b.node("CumSum", [names[0], b.const(np.array(attrs["dim"], dtype=np.int64))])


register(OpDef("cumsum", ("cumsum", "CumSum"), 1, _along_infer, _dim_draw(False),
               lambda x, dim: _torch().cumsum(x, dim), _cumsum_onnx,
               reason="a scan: blocked prefix sums reorder additions", tags=frozenset({"reduction", "scan"})))

# ---------------------------------------------------------------------------------------------------------------
# matmul and convolution


def _matmul_infer(types: list[TensorType], _attrs: dict) -> TensorType:
    import numpy as np
    a, b = types
    if a.rank not in (2, 3) or b.rank not in (2, 3):
        raise ValueError(f"matmul takes 2-D or 3-D arguments, got {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul inner dims differ: {a.shape} @ {b.shape}")
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError as e:
        raise ValueError(f"matmul batch dims do not broadcast: {a.shape} @ {b.shape}") from e
    return TensorType(batch + (a.shape[-2], b.shape[-1]), FLOAT)


register(OpDef("matmul", ("matmul", "MatMul"), 2, _matmul_infer, fits(_matmul_infer),
               lambda a, b: _torch().matmul(a, b), lambda b, names, attrs: b.node("MatMul", names),
               reason="blocked GEMM with a fused epilogue and broadcast batch dims",
               tags=frozenset({"matmul"})))


def _window(size: int, kernel: int, stride: int, pad: int, dilation: int = 1, ceil: bool = False) -> int:
    """Output length of a sliding window (torch's rule: with ceil_mode the last window starts inside the input
    or its left padding)."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    out = (span + (stride - 1 if ceil else 0)) // stride + 1
    if ceil and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _conv_infer(types: list[TensorType], attrs: dict) -> TensorType:
    x, w = types
    if x.rank != 4 or w.rank != 4:
        raise ValueError(f"conv2d takes NCHW input and OIHW weight, got {x.shape} and {w.shape}")
    g, s, p, d = (int(attrs.get(k, 1 if k != "padding" else 0)) for k in ("groups", "stride", "padding", "dilation"))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if g < 1 or c != cg * g or o % g:
        raise ValueError(f"conv2d groups {g} do not fit input channels {c} and weight {w.shape}")
    if s < 1 or p < 0 or d < 1:
        raise ValueError("conv2d stride/dilation must be >= 1, padding >= 0")
    oh, ow = _window(h, kh, s, p, d), _window(wd, kw, s, p, d)
    if oh < 1 or ow < 1:
        raise ValueError(f"conv2d window larger than the padded input {x.shape} (kernel {kh}x{kw})")
    return TensorType((n, o, oh, ow), FLOAT)


def _conv_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    x, w = types
    if x.rank != 4 or w.rank != 4 or w.shape[1] < 1 or x.shape[1] % w.shape[1]:
        return None
    attrs = {"groups": x.shape[1] // w.shape[1], "stride": rng.choice((1, 2)), "padding": rng.choice((0, 1)),
             "dilation": rng.choice((1, 1, 2))}
    for fallback in ({}, {"dilation": 1}, {"dilation": 1, "padding": 1}):  # a small input takes a smaller window
        try:
            _conv_infer(types, {**attrs, **fallback})
            return {**attrs, **fallback}
        except ValueError:
            continue
    return None


def _conv_onnx(b, names: list[str], attrs: dict) -> str:
    s, p, d = attrs["stride"], attrs["padding"], attrs["dilation"]
    return b.node("Conv", names, {"strides": [s, s], "pads": [p] * 4, "dilations": [d, d], "group": attrs["groups"]})


register(OpDef("conv2d", ("nn.functional.conv2d", "Conv"), 2, _conv_infer, _conv_draw,
               lambda x, w, stride, padding, dilation, groups: _F().conv2d(
                   x, w, stride=stride, padding=padding, dilation=dilation, groups=groups), _conv_onnx,
               reason="im2col/winograd/direct kernels, channels-last propagation, grouped and strided windows",
               tags=frozenset({"conv", "layout"}),
               # the weight stays static: output channels must divide by the groups, which a plain torch.export Dim
               # cannot say, so declaring one of its dims dynamic makes export refuse every backend alike
               static=lambda types, attrs: {(1, d) for d in range(4)}))

# ---------------------------------------------------------------------------------------------------------------
# pooling


def _pool_infer(types: list[TensorType], attrs: dict) -> TensorType:
    x = types[0]
    if x.rank != 4:
        raise ValueError(f"2-D pooling takes NCHW input, got {x.shape}")
    k, s, p = int(attrs["kernel"]), int(attrs["stride"]), int(attrs["padding"])
    d = int(attrs.get("dilation", 1))
    if k < 1 or s < 1 or d < 1 or not 0 <= p <= k // 2:  # torch: padding at most half the kernel
        raise ValueError(f"pool kernel {k}, stride {s}, padding {p}, dilation {d} not valid")
    n, c, h, w = x.shape
    ceil = bool(attrs.get("ceil_mode"))
    if ceil and (s == 1 or any(_window(v, k, s, p, d, True) != _onnx_ceil_window(v, k, s, p, d) for v in (h, w))):
        # ceil_mode where torch and ONNX part: at stride 1 (a no-op in torch, onnx's reference evaluator makes
        # extra windows) and where torch drops a last window that would start in the right padding (ONNX's
        # shape rule keeps it): the two forms would not compute the same graph
        raise ValueError(f"ceil_mode with stride {s} on {x.shape} means different things in torch and ONNX")
    oh, ow = (_window(v, k, s, p, d, ceil) for v in (h, w))
    if oh < 1 or ow < 1:
        raise ValueError(f"pool window larger than the padded input {x.shape}")
    return TensorType((n, c, oh, ow), FLOAT)


def _onnx_ceil_window(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Output length under ceil_mode by ONNX's shape rule (no torch correction for a window in the padding)."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    return -(-span // stride) + 1


def _pool_draw(max_pool: bool) -> Callable[[random.Random, list[TensorType]], dict | None]:
    def draw(rng: random.Random, types: list[TensorType]) -> dict | None:
        if types[0].rank != 4:
            return None
        k = rng.choice((2, 3) if max_pool else (1, 2, 3))
        attrs: dict[str, Any] = {"kernel": k, "stride": rng.choice((1, 2)), "padding": rng.randint(0, k // 2),
                                 "ceil_mode": rng.random() < 0.5}
        if max_pool:
            attrs["dilation"] = rng.choice((1, 1, 2))
        else:
            attrs["count_include_pad"] = rng.random() < 0.5
        for fallback in ({}, {"ceil_mode": False}, {"dilation": 1, "ceil_mode": False} if max_pool else {},
                         {"kernel": 1, "padding": 0, "dilation": 1, "ceil_mode": False}):
            got = {**attrs, **fallback}
            if not max_pool:
                got.pop("dilation", None)
            try:
                _pool_infer(types, got)
                return got
            except ValueError:
                continue
        return None
    return draw


def _avg_pool_onnx(b, names: list[str], attrs: dict) -> str:
    k, s, p = attrs["kernel"], attrs["stride"], attrs["padding"]
    return b.node("AveragePool", names, {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4,
                                         "ceil_mode": int(attrs["ceil_mode"]),
                                         "count_include_pad": int(attrs["count_include_pad"])})


def _max_pool_onnx(b, names: list[str], attrs: dict) -> str:
    k, s, p, d = attrs["kernel"], attrs["stride"], attrs["padding"], attrs["dilation"]
    return b.node("MaxPool", names, {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4,
                                     "dilations": [d, d], "ceil_mode": int(attrs["ceil_mode"])})


register(OpDef("avg_pool2d", ("nn.functional.avg_pool2d", "AveragePool"), 1, _pool_infer, _pool_draw(False),
               lambda x, kernel, stride, padding, ceil_mode, count_include_pad: _F().avg_pool2d(
                   x, kernel, stride, padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad),
               _avg_pool_onnx, reason="window divisors at padded and ceil-mode edges; channels-last kernels",
               tags=frozenset({"pool", "reduction", "layout"})))
register(OpDef("max_pool2d", ("nn.functional.max_pool2d", "MaxPool"), 1, _pool_infer, _pool_draw(True),
               lambda x, kernel, stride, padding, dilation, ceil_mode: _F().max_pool2d(
                   x, kernel, stride, padding, dilation, ceil_mode=ceil_mode),
               _max_pool_onnx, reason="padded, dilated and ceil-mode windows; channels-last kernels",
               tags=frozenset({"pool", "layout"})))

# ---------------------------------------------------------------------------------------------------------------
# layout and shape


def _transpose_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    if types[0].rank < 2:
        return None
    d0, d1 = sorted(rng.sample(range(types[0].rank), 2))
    return {"dim0": d0, "dim1": d1}


def _swap(rank: int, d0: int, d1: int) -> list[int]:
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return perm


def _permuted(types: list[TensorType], perm: list[int]) -> TensorType:
    if sorted(perm) != list(range(types[0].rank)):
        raise ValueError(f"{perm} is not a permutation of the dims of {types[0].shape}")
    return TensorType(tuple(types[0].shape[i] for i in perm), FLOAT)


register(OpDef("transpose", ("transpose", "Transpose"), 1,
               lambda types, attrs: _permuted(types, _swap(types[0].rank, attrs["dim0"], attrs["dim1"])),
               _transpose_draw, lambda x, dim0, dim1: _torch().transpose(x, dim0, dim1),
               lambda b, names, attrs: b.node("Transpose", names, {"perm": _swap(b.rank(names[0]), attrs["dim0"],
                                                                                 attrs["dim1"])}),
               reason="a strided view the next op must read correctly or copy (layout propagation)",
               tags=frozenset({"layout"})))


def _permute_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    rank = types[0].rank
    if rank < 2:
        return None
    perm = list(range(rank))
    while perm == sorted(perm):  # a permutation that moves something
        rng.shuffle(perm)
    return {"dims": tuple(perm)}


register(OpDef("permute", ("permute", "Transpose"), 1, lambda types, attrs: _permuted(types, list(attrs["dims"])),
               _permute_draw, lambda x, dims: _torch().permute(x, dims),
               lambda b, names, attrs: b.node("Transpose", names, {"perm": list(attrs["dims"])}),
               reason="a general strided view: channels-last and transposed layouts propagated through fusions",
               tags=frozenset({"layout"})))


def _factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _reshape_draw(rng: random.Random, types: list[TensorType]) -> dict:
    """A shape of rank 1..4 with the same element count: the count's prime factors dealt into the dims."""
    shape = [1] * rng.randint(1, 4)
    for f in _factors(_numel(types[0].shape)):
        shape[rng.randrange(len(shape))] *= f
    return {"shape": tuple(shape)}


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _reshape_infer(types: list[TensorType], attrs: dict) -> TensorType:
    shape = tuple(int(s) for s in attrs["shape"])
    if not shape or any(s < 1 for s in shape) or _numel(shape) != _numel(types[0].shape):
        raise ValueError(f"cannot reshape {types[0].shape} to {shape}")
    return TensorType(shape, FLOAT)


def _reshape_onnx(b, names: list[str], attrs: dict) -> str:
    import numpy as np
    return b.node("Reshape", [names[0], b.const(np.array(attrs["shape"], dtype=np.int64))])


register(OpDef("reshape", ("reshape", "Reshape"), 1, _reshape_infer, _reshape_draw,
               lambda x, shape: _torch().reshape(x, shape), _reshape_onnx,
               reason="a view or a copy depending on the producer's layout; splits and merges tiled dims",
               tags=frozenset({"layout"})))


def _flatten_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    rank = types[0].rank
    return None if rank < 2 else {"axis": rng.randint(1, rank - 1)}


def _flatten_infer(types: list[TensorType], attrs: dict) -> TensorType:
    shape, a = types[0].shape, attrs.get("axis")
    if not isinstance(a, int) or not 1 <= a < len(shape):
        raise ValueError(f"flatten axis {a!r} must split the dims of {shape}")
    return TensorType((_numel(shape[:a]), _numel(shape[a:])), FLOAT)


register(OpDef("flatten", ("flatten", "Flatten"), 1, _flatten_infer, _flatten_draw,
               lambda x, axis: _torch().flatten(_torch().flatten(x, axis), 0, axis - 1),
               lambda b, names, attrs: b.node("Flatten", names, {"axis": attrs["axis"]}),
               reason="ONNX Flatten's 2-D result: merges the dims before and after an axis",
               tags=frozenset({"layout"})))


def _concat_infer(types: list[TensorType], attrs: dict) -> TensorType:
    a, b = types
    dim = _dim_of(types, attrs)
    if a.rank != b.rank or any(x != y for i, (x, y) in enumerate(zip(a.shape, b.shape)) if i != dim):
        raise ValueError(f"concat along {dim} needs equal other dims: {a.shape}, {b.shape}")
    shape = list(a.shape)
    shape[dim] += b.shape[dim]
    return TensorType(tuple(shape), FLOAT)


def _concat_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    a, b = types
    if a.rank != b.rank or a.rank < 1:
        return None
    dims = [d for d in range(a.rank) if all(x == y for i, (x, y) in enumerate(zip(a.shape, b.shape)) if i != d)]
    return {"dim": rng.choice(dims)} if dims else None


register(OpDef("concat", ("cat", "Concat"), 2, _concat_infer, _concat_draw,
               lambda x, y, dim: _torch().cat([x, y], dim),
               lambda b, names, attrs: b.node("Concat", names, {"axis": attrs["dim"]}),
               reason="two producers writing into one buffer at offsets (concat elimination)",
               tags=frozenset({"layout"})))


def _slice_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    shape = types[0].shape
    dims = [d for d, s in enumerate(shape) if s >= 2] or list(range(len(shape)))
    if not dims:
        return None
    dim = rng.choice(dims)
    start = rng.randrange(shape[dim])
    return {"dim": dim, "start": start, "end": rng.randint(start + 1, shape[dim]), "step": rng.choice((1, 2, 3))}


def _slice_infer(types: list[TensorType], attrs: dict) -> TensorType:
    dim, shape = _dim_of(types, attrs), list(types[0].shape)
    start, end, step = int(attrs["start"]), int(attrs["end"]), int(attrs["step"])
    if not 0 <= start < end <= shape[dim] or step < 1:
        raise ValueError(f"slice {start}:{end}:{step} empty or outside dim {dim} of {types[0].shape}")
    shape[dim] = -(-(end - start) // step)
    return TensorType(tuple(shape), FLOAT)


def _slice_torch(x, dim: int, start: int, end: int, step: int):
    return x[(slice(None),) * dim + (slice(start, end, step),)]


def _slice_onnx(b, names: list[str], attrs: dict) -> str:
    import numpy as np
    ints = [b.const(np.array([attrs[k]], dtype=np.int64)) for k in ("start", "end", "dim", "step")]
    return b.node("Slice", [names[0], *ints])


register(OpDef("slice", ("slice", "Slice"), 1, _slice_infer, _slice_draw, _slice_torch, _slice_onnx,
               reason="a strided view with an offset: non-unit steps defeat vectorized loads",
               tags=frozenset({"layout"})))

PAD_WIDTHS = (0, 1, 2)  # per side: small, so reflect fits and the padded border stays a visible share


def _pad_infer(reflect: bool) -> Callable[[list[TensorType], dict], TensorType]:
    def infer(types: list[TensorType], attrs: dict) -> TensorType:
        shape, pads = list(types[0].shape), [int(p) for p in attrs["pad"]]
        n = len(pads) // 2
        if len(pads) % 2 or not 1 <= n <= len(shape) or any(p < 0 for p in pads):
            raise ValueError(f"pad {pads} does not fit {types[0].shape}")
        if reflect and (len(shape) - n not in (1, 2) or n > 2):  # torch: reflect pads 2-D/3-D or 3-D/4-D inputs
            raise ValueError(f"reflect pad of {n} dims does not take shape {types[0].shape}")
        for i in range(n):  # torch's order: last dim first, (left, right) each
            d = len(shape) - 1 - i
            if reflect and max(pads[2 * i], pads[2 * i + 1]) >= shape[d]:
                raise ValueError(f"reflect pad {pads} as wide as dim {d} of {types[0].shape}")
            shape[d] += pads[2 * i] + pads[2 * i + 1]
        return TensorType(tuple(shape), FLOAT)
    return infer


def _pad_draw(reflect: bool) -> Callable[[random.Random, list[TensorType]], dict | None]:
    def draw(rng: random.Random, types: list[TensorType]) -> dict | None:
        rank = types[0].rank
        if reflect:
            ns = [n for n in (1, 2) if rank - n in (1, 2)]
        else:
            ns = [n for n in (1, 2) if n <= rank]
        if not ns:
            return None
        n = rng.choice(ns)
        widths = [w for w in PAD_WIDTHS if not reflect or w < min(types[0].shape[rank - n:])]
        pad = [rng.choice(widths) for _ in range(2 * n)]
        if not any(pad):
            pad[rng.randrange(len(pad))] = max(widths)
        attrs: dict[str, Any] = {"pad": tuple(pad)}
        if not reflect:
            attrs["value"] = rng.choice((0.0, 0.5, -1.25))
        try:
            _pad_infer(reflect)(types, attrs)
        except ValueError:
            return None
        return attrs
    return draw


def _pad_onnx(mode: str) -> Callable:
    def emit(b, names: list[str], attrs: dict) -> str:
        import numpy as np
        rank, pads = b.rank(names[0]), list(attrs["pad"])
        begin, end = [0] * rank, [0] * rank
        for i in range(len(pads) // 2):
            begin[rank - 1 - i], end[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
        inputs = [names[0], b.const(np.array(begin + end, dtype=np.int64))]
        if mode == "constant":
            inputs.append(b.const(np.float64(attrs["value"])))
        return b.node("Pad", inputs, {"mode": mode})
    return emit


register(OpDef("pad_constant", ("nn.functional.pad.constant", "Pad"), 1, _pad_infer(False), _pad_draw(False),
               lambda x, pad, value: _F().pad(x, pad, mode="constant", value=value), _pad_onnx("constant"),
               reason="a padded producer fused into a conv/pool window (padding folding)",
               tags=frozenset({"layout", "pad"})))
register(OpDef("pad_reflect", ("nn.functional.pad.reflect", "Pad"), 1, _pad_infer(True), _pad_draw(True),
               lambda x, pad: _F().pad(x, pad, mode="reflect"), _pad_onnx("reflect"),
               reason="index arithmetic at the borders (reflected reads)", tags=frozenset({"layout", "pad"})))

EXPAND_SIZES = (2, 3, 4)  # what a size-1 dim (or a new leading dim) grows to


def _expand_draw(rng: random.Random, types: list[TensorType]) -> dict | None:
    shape = list(types[0].shape)
    ones = [d for d, s in enumerate(shape) if s == 1]
    grown = [rng.choice(EXPAND_SIZES) if d in ones and rng.random() < 0.8 else s for d, s in enumerate(shape)]
    if grown == shape or rng.random() < 0.25:  # nothing to grow, or sometimes: a new leading dim
        grown = [rng.choice(EXPAND_SIZES)] + grown
    return {"shape": tuple(grown)} if len(grown) <= 5 else None


def _expand_infer(types: list[TensorType], attrs: dict) -> TensorType:
    shape, target = types[0].shape, tuple(int(s) for s in attrs["shape"])
    lead = len(target) - len(shape)
    if lead < 0 or any(s != t and s != 1 for s, t in zip(shape, target[lead:])) or any(t < 1 for t in target):
        raise ValueError(f"cannot expand {shape} to {target}")
    return TensorType(target, FLOAT)


def _expand_onnx(b, names: list[str], attrs: dict) -> str:
    import numpy as np
    return b.node("Expand", [names[0], b.const(np.array(attrs["shape"], dtype=np.int64))])


register(OpDef("expand", ("expand", "Expand"), 1, _expand_infer, _expand_draw,
               lambda x, shape: x.expand(*shape), _expand_onnx,
               reason="a stride-0 view: broadcast reads the consumer must not write through",
               tags=frozenset({"layout", "broadcast"})))


# the integer, selection, attention, norm and cast ops register themselves on import
from fpdiff.analysis.fuzz import vocab_index, vocab_nn  # noqa: E402, F401
