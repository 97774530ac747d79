"""A weight-quantized graph's layers as its quantizer made them: for each weight the quantizer stored in integers
(a dynamic-range MatMulInteger or ConvInteger, a 4- or 8-bit MatMulNBits, a DequantizeLinear of a constant), the
float weight it came from in the float graph the quantizer read, the float graph's node that computes with it (the
name the quantizer's node lists take), and its values dequantized exactly as the quantized graph holds them. What
each one costs alone is measured in float64: the float graph with that one weight replaced by its dequantized values,
against the float graph as it is."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from fpdiff.onnxtools.emulate import along, unpack_nbits

TFLITE_WEIGHTS = "fpdiff.tflite_weights"  # model/tflite_qdq.py's WEIGHTS_KEY: its graphs' weighted ops

# the suffixes quantizers give a weight's integer copy: onnxruntime's dynamic and QDQ quantizers and NNCF
# ("W_quantized"; "W_Transposed_quantized" where quantize_dynamic made a Gemm's weight a MatMul's, transposed),
# onnxruntime's MatMulNBitsQuantizer ("W_Q4", "W_Q8"; "W_DQ_Q4" in its QDQ form)
_SUFFIXES = ("_Transposed_quantized", "_quantized", "_DQ_Q4", "_Q4", "_Q8", "_Q2")
# ops a weight passes through on its way to the node that computes with it (torch.onnx writes Transpose(W))
_PASS = frozenset({"Transpose", "Cast", "Identity"})


@dataclass(frozen=True)
class QuantizedWeight:
    """One weight the quantizer stored in integers: the float graph's initializer it came from, the float graph's
    nodes that compute with it (op types beside), and its dequantized values in that initializer's layout."""
    weight: str
    nodes: tuple[str, ...]
    ops: tuple[str, ...]
    values: np.ndarray


def quantized_weights(quantized: onnx.ModelProto, float_graph: onnx.ModelProto, every: bool = False
                      ) -> list[QuantizedWeight]:
    """The quantized graph's integer weights matched to the float graph's, in the quantized graph's order; a weight
    the float graph has under no known name, or in another shape, is left out. `every`: a .tflite's other quantized
    constants too (an embedding table), paired by tensor name, each named by its tensor (not an op's scope)."""
    mine, theirs = _tflite_weights(quantized), _tflite_weights(float_graph)
    if mine is not None and theirs is not None:
        paired = _paired_by_op(quantized, float_graph, mine, theirs)
        return paired + (_paired_by_tensor(quantized, float_graph, {w.weight for w in paired}) if every else [])
    float_graph = folded(float_graph)
    inits = {t.name: t for t in quantized.graph.initializer}
    floats = {t.name: t for t in float_graph.graph.initializer}
    readers = _readers(float_graph)
    out, seen = [], set()
    for node in quantized.graph.node:
        found = _dequantized(node, inits)
        if found is None:
            continue
        stored, values = found
        name = next((c for c in _names(stored) if c in floats), None)
        if name is None or name in seen:
            continue
        shape = tuple(floats[name].dims)
        values = values if values.shape == shape else values.T if values.T.shape == shape else None
        computing = [(n.name, n.op_type) for n in readers.get(name, [])]
        if values is None or not computing:
            continue
        seen.add(name)
        computing = _as_quantizer_names(node.name, computing)
        out.append(QuantizedWeight(name, tuple(n for n, _ in computing), tuple(op for _, op in computing), values))
    return out


def _tflite_weights(m: onnx.ModelProto) -> dict[str, list[str]] | None:
    """A graph read from a .tflite (model/tflite_qdq.py): its weighted ops by output tensor name, each with its op
    type and the graph's name of its weight's float value; None for any other graph."""
    import json
    props = {p.key: p.value for p in m.metadata_props}
    return json.loads(props[TFLITE_WEIGHTS]) if TFLITE_WEIGHTS in props else None


def _paired_by_op(quantized: onnx.ModelProto, float_graph: onnx.ModelProto, mine: dict[str, list[str]],
                  theirs: dict[str, list[str]]) -> list[QuantizedWeight]:
    """Two graphs read from .tflite files, their weights paired by the op that computes with them (its output
    tensor's name, which ai-edge-quantizer keeps and its recipes scope by): the quantized weight's dequantized
    values, the float weight's constant, the op's output name as the node."""
    inits = {t.name: t for t in quantized.graph.initializer}
    made_by = {n.output[0]: n for n in quantized.graph.node}
    floats = {t.name: t for t in float_graph.graph.initializer}
    out = []
    for scope, (op, value) in mine.items():
        node, float_value = made_by.get(value), (theirs.get(scope) or [None, None])[1]
        found = _dequantized(node, inits) if node is not None else None
        if found is None or float_value not in floats or tuple(floats[float_value].dims) != found[1].shape:
            continue
        out.append(QuantizedWeight(float_value, (scope,), (op,), found[1]))
    return out


def _paired_by_tensor(quantized: onnx.ModelProto, float_graph: onnx.ModelProto, taken: set[str]
                      ) -> list[QuantizedWeight]:
    """A .tflite's quantized constants no weighted op reads, paired with the float file's constant of the same
    tensor name (the reader names a constant NAME#INDEX:cN; the index and N differ between the two files)."""
    inits = {t.name: t for t in quantized.graph.initializer}
    by_name: dict[str, list[onnx.TensorProto]] = {}
    for t in float_graph.graph.initializer:
        by_name.setdefault(t.name.split("#")[0], []).append(t)
    out = []
    for node in quantized.graph.node:
        found = _dequantized(node, inits)
        if found is None:
            continue
        same = [t for t in by_name.get(found[0].split("#")[0], []) if tuple(t.dims) == found[1].shape]
        if len(same) == 1 and same[0].name not in taken:
            taken.add(same[0].name)
            out.append(QuantizedWeight(same[0].name, (found[0].split("#")[0],), (node.op_type,), found[1]))
    return out


def quantized_constants(quantized: onnx.ModelProto) -> int:
    """How many constants the graph holds quantized (each one an integer weight some node dequantizes)."""
    inits = {t.name: t for t in quantized.graph.initializer}
    return sum(_dequantized(n, inits) is not None for n in quantized.graph.node)


def _as_quantizer_names(quantized: str, computing: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The float nodes by the names the quantizer's node lists take: onnxruntime's quantize_dynamic replaces a Gemm
    G by a MatMul G_MatMul before it reads its lists (its integer node is G_MatMul_quant), so G_MatMul it is."""
    return [(n + "_MatMul", "MatMul") if op == "Gemm" and quantized == n + "_MatMul_quant" else (n, op)
            for n, op in computing]


def folded(m: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the float graph with each Transpose of a weight folded into the weight (exact): the weight as NNCF
    names it, and as a value the evaluation can be handed. A graph read from a .tflite is left as it is: its weights
    are paired by op, under the names it has."""
    from fpdiff.onnxtools.nncf_graph import folded_transposes
    if _tflite_weights(m) is not None:
        return m
    copy = onnx.ModelProto()
    copy.CopyFrom(m)
    return folded_transposes(copy)


def _names(stored: str) -> list[str]:
    """The float names a quantizer's integer copy of a weight may have come from (the copy's own first)."""
    return [stored, *(stored[:-len(s)] for s in _SUFFIXES if stored.endswith(s) and len(stored) > len(s))]


def _scale_of(stored: str, inits: dict[str, onnx.TensorProto]) -> np.ndarray | None:
    """The scale onnxruntime's dynamic quantizer stored beside an integer weight (W_scale, W_Transposed_scale)."""
    base = stored.removesuffix("_quantized")
    return numpy_helper.to_array(inits[base + "_scale"]) if base + "_scale" in inits else None


def _readers(m: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    """For each initializer, the named nodes that compute with it, through Transpose, Cast and Identity."""
    by_input: dict[str, list[onnx.NodeProto]] = {}
    for n in m.graph.node:
        for i in n.input:
            by_input.setdefault(i, []).append(n)
    out: dict[str, list[onnx.NodeProto]] = {}
    for t in m.graph.initializer:
        todo, found = [t.name], []
        while todo:
            for n in by_input.get(todo.pop(), []):
                if n.op_type in _PASS:
                    todo.extend(n.output)
                elif n.name and n not in found:
                    found.append(n)
        out[t.name] = found
    return out


def _dequantized(node: onnx.NodeProto, inits: dict[str, onnx.TensorProto]) -> tuple[str, np.ndarray] | None:
    """(the integer weight's name, its dequantized float64 values) where `node` reads an integer weight."""
    def value(i: int) -> np.ndarray | None:
        return numpy_helper.to_array(inits[node.input[i]]) if len(node.input) > i and node.input[i] in inits \
            else None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type == "MatMulNBits" and value(1) is not None and value(2) is not None:
        w = unpack_nbits(value(1), value(2), value(3), attrs["K"], attrs["N"], attrs.get("bits", 4),
                         attrs.get("block_size", 32))
        return node.input[1], w.T  # [K, N], as the MatMul it replaced reads it
    if node.op_type in ("MatMulInteger", "ConvInteger") and value(1) is not None:
        stored = node.input[1]
        scale = _scale_of(stored, inits)
        if scale is None:
            return None
        q, zero = value(1).astype(np.float64), value(3)
        axis = q.ndim - 1 if node.op_type == "MatMulInteger" else 0  # per output channel
        z = along(zero.astype(np.float64), axis, q.ndim) if zero is not None else 0.0
        return stored, (q - z) * along(np.asarray(scale, np.float64), axis, q.ndim)
    if node.op_type == "DequantizeLinear" and value(0) is not None and value(1) is not None:
        q, zero = value(0).astype(np.float64), value(2)
        axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
        s = along(np.asarray(value(1), np.float64), axis, q.ndim, block, q.shape)
        z = along(zero.astype(np.float64), axis, q.ndim, block, q.shape) if zero is not None else 0.0
        return node.input[0], (q - z) * s
    return None


def weight_costs(float_graph: onnx.ModelProto, feeds: dict[str, np.ndarray], weights: Sequence[QuantizedWeight]
                 ) -> dict[str, float]:
    """What each weight quantized alone costs at the outputs: the float graph in float64 with that one weight
    dequantized, against the float graph as it is (relative L2 over every float output)."""
    ev, wide, base = _float_run(float_graph, feeds)
    return {w.weight: rel_l2([np.asarray(o) for o in ev.run(None, {**wide, w.weight: w.values})], base)
            for w in weights}


def _float_run(float_graph: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[Any, dict, list[np.ndarray]]:
    """The float graph's float64 evaluator (weights handed in as feeds replace its initializers), its widened
    inputs, and its own outputs."""
    from fpdiff.onnxtools.emulate import wide_feeds, wide_graph
    from fpdiff.onnxtools.evaluator import evaluator
    from fpdiff.onnxtools.graph import float64_ops
    ev = evaluator(wide_graph(folded(float_graph)), new_ops=float64_ops())
    wide = wide_feeds(feeds)
    return ev, wide, [np.asarray(o) for o in ev.run(None, wide)]


@dataclass(frozen=True)
class Rewrite:
    """A weight-only quantized graph against the float graph with the quantizer's own dequantized weights: how far
    apart their outputs are (relative L2, both in float64), what the rounded weights alone cost, and the first tensor
    both graphs name whose values differ, with the quantized graph's node that makes it."""
    apart: float
    weights_cost: float
    first: str | None
    node: str | None


def rewrite(quantized: onnx.ModelProto, float_graph: onnx.ModelProto, feeds: dict[str, np.ndarray],
            emulated: Sequence[np.ndarray]) -> Rewrite | None:
    """Whether a weight-only quantizer's graph computes the float graph with its weights rounded and nothing else
    (`emulated`: the quantized graph's exact float64 outputs); None where a quantized weight was not matched to its
    float one (the float graph with only some weights rounded would differ for that alone)."""
    weights = quantized_weights(quantized, float_graph, every=True)
    if not weights or len(weights) < quantized_constants(quantized):
        return None
    ev, wide, base = _float_run(float_graph, feeds)
    rounded = ev.run(None, {**wide, **{w.weight: w.values for w in weights}}, intermediate=True)
    outs = [np.asarray(rounded[o.name]) for o in float_graph.graph.output]
    apart = rel_l2(emulated, outs)
    first = node = None
    if apart > REWRITE_FLOOR:
        first, node = _first_apart(quantized, feeds, rounded)
    return Rewrite(apart, rel_l2(outs, base), first, node)


# Both sides are float64 evaluations of the same arithmetic on the same rounded weights: only the order of a sum
# can differ (about 1e-16 relative), so anything past 1e-9 is another computation, never rounding
REWRITE_FLOOR = 1e-9


def rel_l2(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    """Relative L2 of `got` against `want` over every float output together (compare.rel_l2's scaling); inf where
    they are not the same outputs."""
    from fpdiff.core import compare
    pairs = [(np.ravel(np.asarray(g, np.float64)), np.ravel(np.asarray(w, np.float64))) for g, w in zip(got, want)
             if np.asarray(w).dtype.kind == "f"]
    if not pairs or len(got) != len(want):
        return float("inf") if len(got) != len(want) else 0.0
    return compare.rel_l2(np.concatenate([w for _, w in pairs]), np.concatenate([g for g, _ in pairs]))


def _first_apart(quantized: onnx.ModelProto, feeds: dict[str, np.ndarray], rounded: dict[str, np.ndarray]
                 ) -> tuple[str | None, str | None]:
    """The first tensor, in the quantized graph's order, that both graphs compute and whose values differ past
    REWRITE_FLOOR, and the quantized graph's node that makes it."""
    from fpdiff.onnxtools.emulate import emulated_values
    values = emulated_values(quantized, feeds)
    for n in quantized.graph.node:
        for o in n.output:
            mine, theirs = values.get(o), rounded.get(o)
            if mine is None or theirs is None or np.shape(mine) != np.shape(theirs) or \
                    np.asarray(theirs).dtype.kind != "f":
                continue
            if rel_l2([mine], [theirs]) > REWRITE_FLOOR:
                return o, f"{n.op_type} {n.name}"
    return None, None
