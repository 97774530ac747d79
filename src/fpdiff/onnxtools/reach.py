"""How far float32 arithmetic alone can move the value a quantized kernel rounds, element by element, so a kernel
is judged by the steps it lands beyond that reach and not by steps float32 itself takes.

Why: e4m3's grid near zero is fine (2**-9 of the scale apart) and a Conv whose terms cancel computes a small value
with an absolute float32 error set by its terms, not by its result: a healthy backend's value then rounds several
e4m3 steps from the float64 emulation's (DNSMOS at fp8 on ONNX Runtime, BENCHMARKS.md). int8's grid is the scale
itself, so this reach almost never exceeds a step there.

The bound is first order and holds for any summation order, blocked, pairwise or fused (Higham, Accuracy and
Stability of Numerical Algorithms, ch. 3): a value carries |error| <= n * EPS * M, where M sums the magnitudes of
the terms that made it (|a||b| over a dot product, |a| + |b| for an add) and n counts the roundings on its longest
path (a dot product of K terms: K). Both are propagated from the kernel's exact inputs (dequantized values,
constants, graph inputs) through the float ops before its QuantizeLinear. An op with no rule here (Softmax, a
normalization, Sqrt) gives no reach: that kernel is judged by its raw steps, as before."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

# twice float32's unit roundoff: a kernel may round twice where the bound counts one (a product, then its sum)
EPS = float(np.finfo(np.float32).eps)
QUANTIZER_ROUNDINGS = 2  # the backend's own x / scale and its conversion, at the QuantizeLinear
EXACT = frozenset({"DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                   "ConvInteger"})  # their outputs are exact, or rounded once (a dequantized value): a kernel's input
# 1-Lipschitz or linear rearrangements: the bound is the op applied to the magnitudes, no rounding of their own
MOVES = frozenset({"Identity", "Dropout", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Slice",
                   "Split", "Gather", "Expand", "Tile", "Pad", "MaxPool", "DepthToSpace", "SpaceToDepth",
                   "Relu", "Clip", "Neg", "Abs"})
# elementwise ops with a Lipschitz constant L: error out <= L * error in, plus their own few roundings of the output
# (HardSigmoid's and LeakyRelu's slopes are below 1 by default; Erf's and Gelu's steepest is 2/sqrt(pi), 1.128)
LIPSCHITZ = {"Sigmoid": 0.25, "Tanh": 1.0, "HardSigmoid": 1.0, "HardSwish": 1.5, "Erf": 1.13, "Gelu": 1.13,
             "Softplus": 1.0, "Softsign": 1.0, "LeakyRelu": 1.0}
OWN_ROUNDINGS = 4  # a transcendental kernel is within a few ulps of its result


Bound = tuple[np.ndarray, int]  # (M, n): |error| <= n * EPS * M


class Reach:
    """The float32 bound of every float tensor a graph's quantizers read, from one evaluation's values."""

    def __init__(self, m: onnx.ModelProto, values: dict[str, Any], run_node: Callable[[int, list], Sequence]):
        self.nodes = list(m.graph.node)
        self.made_by = {o: i for i, n in enumerate(self.nodes) for o in n.output}
        self.values, self.run_node = values, run_node
        self.memo: dict[str, Bound | None] = {}

    def bound(self, t: str) -> np.ndarray | None:
        """The largest |float32 result - exact result| of tensor t, per element; None: an op without a rule."""
        try:
            b = self._bound(t)
        except (RecursionError, ValueError, TypeError, IndexError, KeyError):
            return None
        if b is None:
            return None
        m, n = b
        return (n + QUANTIZER_ROUNDINGS) * EPS * m

    def _bound(self, t: str) -> Bound | None:
        if t in self.memo:
            return self.memo[t]
        self.memo[t] = None  # a cycle (none in a valid graph) gives no bound
        v = self.values.get(t)
        i = self.made_by.get(t)
        if v is None:
            out = None
        elif i is None or self.nodes[i].op_type in EXACT or not _floating(v):
            out = (np.abs(np.asarray(v, dtype=np.float64)), 0 if i is None else 1)
        else:
            out = self._through(i, t)
        self.memo[t] = out
        return out

    def _ins(self, node: onnx.NodeProto) -> list[Bound | None]:
        return [self._bound(x) if x else None for x in node.input]

    def _through(self, i: int, t: str) -> Bound | None:
        node = self.nodes[i]
        op, ins = node.op_type, self._ins(node)
        real = [self.values.get(x) if x else None for x in node.input]
        if op in MOVES or op in AVERAGES or op in DOTS:
            return self._applied(i, node, t, ins, real)
        if op in ELEMENTWISE:
            return _elementwise(op, node, ins, real)
        if op in LIPSCHITZ and ins[0] is not None:
            out = np.abs(np.asarray(self.values[t], dtype=np.float64))
            return LIPSCHITZ[op] * ins[0][0] + out, max(ins[0][1], OWN_ROUNDINGS)
        return None

    def _applied(self, i: int, node: onnx.NodeProto, t: str, ins: list[Bound | None], real: list) -> Bound | None:
        """The op itself run on the magnitudes (weights and biases made positive): M for a dot product, an
        average, a rearrangement."""
        data = DATA_INPUTS.get(node.op_type, range(len(node.input)))
        fed = []
        for k, (b, v) in enumerate(zip(ins, real)):
            if k in data and b is not None and _floating(v):
                fed.append(b[0])
            elif k in data and _floating(v):
                return None
            else:
                fed.append(v)
        outs = self.run_node(i, fed)
        m = np.abs(np.asarray(outs[list(node.output).index(t)], dtype=np.float64))
        n = max((b[1] for k, b in enumerate(ins) if k in data and b is not None), default=0)
        return m, n + _roundings(node.op_type, real, m)


ELEMENTWISE = frozenset({"Add", "Sub", "Sum", "Mul", "Div", "Where", "BatchNormalization", "Cast"})
DOTS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose"})
AVERAGES = frozenset({"AveragePool", "GlobalAveragePool", "ReduceMean", "ReduceSum", "Resize", "Upsample"})
DATA_INPUTS = {"Reshape": {0}, "Slice": {0}, "Gather": {0}, "Expand": {0}, "Tile": {0}, "Pad": {0, 2},
               "Split": {0}, "Squeeze": {0}, "Unsqueeze": {0}, "Clip": {0}, "Resize": {0}, "Upsample": {0},
               "ReduceMean": {0}, "ReduceSum": {0}, "MatMul": {0, 1}, "Gemm": {0, 1, 2}, "Conv": {0, 1, 2},
               "ConvTranspose": {0, 1, 2}}


def _roundings(op: str, real: list, out: np.ndarray) -> int:
    """The roundings an op adds on its longest path: a dot product's length, an average's window, plus one."""
    if op in DOTS:
        w = np.asarray(real[1])
        if op == "MatMul":
            return int(np.asarray(real[0]).shape[-1]) + 1
        if op == "Gemm":
            return int(np.asarray(real[0]).size // max(1, out.shape[0])) + 2
        return int(w.size // max(1, w.shape[0] if op == "Conv" else w.shape[1])) + 2
    if op in AVERAGES:
        return int(np.asarray(real[0]).size // max(1, out.size)) + 2 if op != "Resize" else 5
    return 0


def _elementwise(op: str, node: onnx.NodeProto, ins: list[Bound | None], real: list) -> Bound | None:
    """The bound of an elementwise op from its operands' bounds and values."""
    if op == "Cast":
        return (ins[0][0], ins[0][1] + 1) if ins[0] is not None and _floating(real[0]) else None
    if op == "Where":
        if ins[1] is None or ins[2] is None:
            return None
        return np.where(np.asarray(real[0], bool), ins[1][0], ins[2][0]), max(ins[1][1], ins[2][1])
    if op == "BatchNormalization":
        return _normalized(node, ins[0], real) if ins[0] is not None and len(real) == 5 else None
    if any(b is None for b, v in zip(ins, real) if _floating(v)):
        return None
    if op in ("Add", "Sub", "Sum"):
        return sum(b[0] for b in ins), max(b[1] for b in ins) + len(ins) - 1
    a, b = ins[0], ins[1] if len(ins) > 1 else None
    if op == "Mul" and b is not None:
        return a[0] * b[0], a[1] + b[1] + 1
    if op == "Div" and b is not None:
        d = np.abs(np.asarray(real[1], dtype=np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            return a[0] / d + np.abs(np.asarray(real[0], dtype=np.float64)) * b[0] / d ** 2, a[1] + b[1] + 1
    return None


def _normalized(node: onnx.NodeProto, x: Bound, real: list) -> Bound:
    """BatchNormalization (inference): (x - mean) * scale / sqrt(var + eps) + bias, four roundings."""
    ndim, (scale, bias, mean, var) = np.ndim(real[0]), (np.asarray(r, dtype=np.float64) for r in real[1:])
    shape = (1, -1) + (1,) * (ndim - 2)
    eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
    gain = (np.abs(scale) / np.sqrt(var + eps)).reshape(shape)
    return (x[0] + np.abs(mean).reshape(shape)) * gain + np.abs(bias).reshape(shape), x[1] + 4


def _floating(v: Any) -> bool:
    return v is not None and np.asarray(v).dtype.kind == "f"


def beyond(theirs: np.ndarray, x: np.ndarray, reach: np.ndarray, position: Callable[[np.ndarray], np.ndarray]
           ) -> float:
    """The largest number of grid steps the backend's quantized values lie outside what quantizing any value within
    float32's reach of the exact one can give. `position` quantizes a float value to its grid position."""
    reach = np.where(np.isfinite(reach), reach, 0.0)  # a bound that overflowed says nothing: the raw steps
    lo, hi = position(x - reach), position(x + reach)
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    d = np.maximum(0.0, np.maximum(lo - theirs, theirs - hi))
    return float(np.nan_to_num(d, nan=np.inf).max(initial=0.0))
