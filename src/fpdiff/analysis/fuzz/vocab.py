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
