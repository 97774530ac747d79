"""The ops a fuzz graph is drawn from: each names its ops-catalog entries (torch OpInfo name, ONNX op type), how it
types its output from its arguments, which attributes it may take, and how it is written as torch and as ONNX."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fpdiff.analysis.fuzz.graph import FLOAT, TensorType

# what an op's float arguments must hold for its float64 result to be finite and defined (generate.py draws inputs,
# and puts a guard op before an argument, so they do): any value, > 0, != 0, in [-1, 1]
ANY, POSITIVE, NONZERO, UNIT = "any", "positive", "nonzero", "unit"


@dataclass(frozen=True)
class OpDef:
    """One vocabulary op.
    infer(types, attrs) -> the output's TensorType, raising ValueError when the arguments or attributes do not fit;
    draw(rng, types) -> attributes valid for these argument types, or None when the op cannot take them;
    torch(*tensors, **attrs) -> torch.Tensor: the op in torch (the torch program calls it);
    onnx(b, names, attrs) -> the output's name: emits the op's node(s) into an onnx_graph builder `b`."""
    name: str
    catalog: tuple[str, ...]  # its names in ops' catalogs: ("nn.functional.softmax", "Softmax")
    arity: int
    infer: Callable[[list[TensorType], dict], TensorType]
    draw: Callable[[random.Random, list[TensorType]], dict | None]
    torch: Callable[..., Any]
    onnx: Callable[[Any, list[str], dict], str]
    domain: tuple[str, ...] = ()  # per argument: ANY/POSITIVE/NONZERO/UNIT (missing: ANY)
    arg_dtypes: tuple[str, ...] = ()  # per argument: the dtype it takes (missing: FLOAT)
    integer_valued: bool = False  # a float output holding integers (round, floor, sign): judged by flips
    reason: str = ""  # why it is in the vocabulary: what it exercises where ops meet
    tags: frozenset = field(default_factory=frozenset)  # "reduction", "layout", "elementwise", "matmul", ...


VOCAB: dict[str, OpDef] = {}


def register(op: OpDef) -> OpDef:
    VOCAB[op.name] = op
    return op


def same_type(types: list[TensorType], _attrs: dict) -> TensorType:
    """An elementwise op's output: the broadcast of its arguments' shapes, in FLOAT."""
    import numpy as np
    try:
        shape = tuple(np.broadcast_shapes(*[t.shape for t in types]))
    except ValueError as e:
        raise ValueError(f"shapes do not broadcast: {[t.shape for t in types]}") from e
    return TensorType(shape, FLOAT)


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


def _broadcasts(_rng: random.Random, types: list[TensorType]) -> dict | None:
    """No attributes; None when the two shapes do not broadcast."""
    try:
        same_type(types, {})
    except ValueError:
        return None
    return {}


def _torch():
    import torch
    return torch


def _F():
    import torch.nn.functional as F
    return F


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
