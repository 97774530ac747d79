"""What a fuzz vocabulary op is (OpDef) and the registry the generator draws from (VOCAB). The ops themselves are
defined in vocab.py (float ops) and vocab_index.py / vocab_nn.py (integers, masks, selection, attention, norms,
casts); importing vocab registers them all."""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fpdiff.analysis.fuzz.graph import FLOAT, FORMS, TensorType

# what an op's float arguments must hold for its float64 result to be finite and defined (generate.py draws inputs,
# and puts a guard op before an argument, so they do): any value, > 0, != 0, in [-1, 1]
ANY, POSITIVE, NONZERO, UNIT = "any", "positive", "nonzero", "unit"


@dataclass(frozen=True)
class OpDef:
    """One vocabulary op.
    infer(types, attrs) -> the output's TensorType, raising ValueError when the arguments or attributes do not fit;
    draw(rng, types) -> attributes valid for these argument types, or None when the op cannot take them;
    torch(*tensors, **attrs) -> torch.Tensor: the op in torch (the torch program calls it);
    onnx(b, names, attrs) -> the output's name: emits the op's node(s) into an onnx_graph builder `b`.
    The optional hooks say what a float op does not need: arg_type(rng, j, types) -> the type of a new input for
    argument j given the argument types decided so far (None where they do not allow one: an index's shape and bound
    follow the tensor it indexes); arg_range(j, types, attrs) -> the value range a new input for argument j is drawn
    from (generate.RANGES or an integer range: an index valid for its dim, distinct values along the reduced dim);
    static(types, attrs) -> the (argument, dim) pairs that must stay static (a conv's weight, a norm's channels)."""
    name: str
    catalog: tuple[str, ...]  # its names in ops' catalogs: ("nn.functional.softmax", "Softmax")
    arity: int
    infer: Callable[[list[TensorType], dict], TensorType]
    draw: Callable[[random.Random, list[TensorType]], dict | None]
    torch: Callable[..., Any]
    onnx: Callable[[Any, list[str], dict], str] | None
    domain: tuple[str, ...] = ()  # per argument: ANY/POSITIVE/NONZERO/UNIT (missing: ANY)
    arg_dtypes: tuple[str, ...] = ()  # per argument: the dtype it takes (missing: FLOAT)
    integer_valued: bool = False  # a float output holding integers (round, floor, sign): judged by flips
    reason: str = ""  # why it is in the vocabulary: what it exercises where ops meet
    tags: frozenset = field(default_factory=frozenset)  # "reduction", "layout", "elementwise", "matmul", ...
    fresh: tuple[int, ...] = ()  # arguments always fed by a new input (values only the op's own range makes valid)
    arg_type: Callable[[random.Random, int, list], TensorType | None] | None = None
    arg_range: Callable[[int, list[TensorType], dict], str | None] | None = None
    static: Callable[[list[TensorType], dict], set[tuple[int, int]]] | None = None
    forms: tuple[str, ...] = FORMS  # the forms it is written in (a cast region is a torch program's)


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


def torch_module():
    import torch
    return torch


def functional():
    import torch.nn.functional as F
    return F


def fits(infer: Callable[[list[TensorType], dict], TensorType]) -> Callable:
    """A draw of no attributes that answers None where `infer` refuses the arguments."""
    def draw(_rng: random.Random, types: list[TensorType]) -> dict | None:
        try:
            infer(types, {})
        except ValueError:
            return None
        return {}
    return draw


def reduced_shape(types: list[TensorType], attrs: dict) -> tuple[int, ...]:
    """The shape after reducing (or selecting along) attrs' dim of the first argument, kept as 1 with keepdim;
    ValueError for a dim out of range or a rank-0 result (few ops fit after one)."""
    shape, dim = list(types[0].shape), attrs.get("dim")
    if not isinstance(dim, int) or not 0 <= dim < len(shape):
        raise ValueError(f"dim {dim!r} out of range for shape {types[0].shape}")
    if attrs.get("keepdim"):
        shape[dim] = 1
    else:
        del shape[dim]
    if not shape:
        raise ValueError("reduces to a rank-0 value")
    return tuple(shape)
