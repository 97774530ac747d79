"""The exact float64 emulation of a quantized ONNX graph: every QuantizeLinear, DequantizeLinear, dynamic
quantization, integer matmul and convolution, and 4-bit weight block computed in float64 with the graph's own
scales, zero points, rounding (half to even) and saturation, and every float op between them in float64. This is
what the format costs, apart from any kernel: a backend's quantized run is measured against it, the float64 source
against it gives the quantization loss. It also records, per quantized activation, how many values its calibrated
range clipped on the inputs judged and how many levels it used."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from fpdiff.onnxtools.mixed import const_value, is_float_constant, reads, subgraphs

# integer ranges of the quantized types (ONNX TensorProto element types)
_RANGES = {onnx.TensorProto.INT8: (-128, 127), onnx.TensorProto.UINT8: (0, 255),
           onnx.TensorProto.INT16: (-32768, 32767), onnx.TensorProto.UINT16: (0, 65535),
           onnx.TensorProto.INT4: (-8, 7), onnx.TensorProto.UINT4: (0, 15),
           onnx.TensorProto.INT32: (-2**31, 2**31 - 1)}
FP8_E4M3FN = onnx.TensorProto.FLOAT8E4M3FN
FP8_MAX = 448.0  # e4m3fn's largest finite value: QuantizeLinear saturates to it (saturate=1, the default)
# the quantized element types whose values fpdiff emulates
QUANTIZED_TYPES = frozenset({*_RANGES, FP8_E4M3FN})


@dataclass
class Activation:
    """One QuantizeLinear of a value computed at run time, as the judged inputs used it."""
    tensor: str
    values: int = 0
    clipped: int = 0  # values outside the calibrated range, saturated to its ends
    levels: int = 0  # distinct quantized values used
    range: tuple[float, float] = (0.0, 0.0)  # the float range its scale and zero point represent
    seen: tuple[float, float] = (np.inf, -np.inf)  # the range of the values it was given
    # against the float model's own value of this tensor in float64 (emulate's `reference`): the squared error of
    # the dequantized value (what flows on: every quantizer upstream and this one) and the reference's squared norm
    err2: float = 0.0
    ref2: float = 0.0

    @property
    def drift(self) -> float | None:
        """The relative L2 of this tensor's quantized value against the float model's; None: no reference."""
        return float(np.sqrt(self.err2 / self.ref2)) if self.ref2 > 0 else None


@dataclass
class Local:
    """One quantizer of the backend's run against the emulation fed the backend's own quantized values upstream:
    the departure its kernel alone made, in steps of its grid (fp8: positions on the e4m3 grid)."""
    tensor: str
    values: int
    off: int  # values a step or more away
    steps: float  # the largest departure
    # the largest departure beyond the steps float32 arithmetic of its kernel can take (onnxtools/reach.py); None:
    # an op of the kernel has no bound there, so the raw steps are all that is known
    beyond: float | None = None


@dataclass
class Emulation:
    """The emulated outputs (float64), each output's quantization step where a per-tensor DequantizeLinear makes
    it (None: a float op makes it), and every activation quantizer's use."""
    outputs: list[np.ndarray]
    steps: list[float | None]
    activations: list[Activation] = field(default_factory=list)
    # tensors quantized with a scale of 0 (x / 0: inf, NaN) or inf (a range past float32's: 0 * inf dequantized)
    zero_scales: list[str] = field(default_factory=list)
    quantizers: int = 0  # quantized tensors in the graph: QuantizeLinear, DequantizeLinear, integer and 4-bit ops
    local: list[Local] = field(default_factory=list)  # a forced emulation's quantizers, in graph order
    # a forced emulation's outputs computed by the float ops after the last quantizers in float32 (the reference
    # evaluator, fed the same dequantized values): what healthy float32 arithmetic of that tail departs by; None:
    # no such run (not forced, or the tail does not run alone)
    tail32: list[np.ndarray] | None = None
    # constants stored quantized with a scale of 0 where their values are not the zero point: they dequantize to 0
    zeroed: list[str] = field(default_factory=list)


def _q_range(elem: int) -> tuple[float, float]:
    if elem == FP8_E4M3FN:
        return -FP8_MAX, FP8_MAX
    return _RANGES[elem]


def along(v: np.ndarray, axis: int, ndim: int, block: int = 0, shape: tuple = ()) -> np.ndarray:
    """A per-axis (or blocked) scale or zero point shaped to broadcast against a tensor of `ndim` dims."""
    v = np.asarray(v, dtype=np.float64)
    if v.ndim == 0 or ndim == 0:
        return v
    if block:
        return np.repeat(v, block, axis=axis)[tuple(slice(0, n) for n in shape)]
    shape1 = [1] * ndim
    shape1[axis % ndim] = v.size
    return v.reshape(shape1)


def quantize(x: np.ndarray, scale: np.ndarray, zero: np.ndarray, elem: int, via: Any = None) -> np.ndarray:
    """QuantizeLinear in float64: round(x / scale) half to even, plus the zero point, saturated to the type (fp8:
    x / scale rounded to the nearest e4m3fn value, saturated at 448). `via` (fp8 only): a what-if, x / scale rounded
    to float32 and then to that narrower float before e4m3, as a runtime that converts in two steps does."""
    with np.errstate(divide="ignore", invalid="ignore"):  # a scale of 0 is the quantized model's: Emulation says it
        y = np.asarray(x, dtype=np.float64) / scale
    if elem == FP8_E4M3FN:
        import ml_dtypes
        if via is not None:
            with np.errstate(over="ignore"):  # past float16's range: inf, saturated below as any value past 448
                y = y.astype(np.float32).astype(via).astype(np.float64)
        return np.clip(y, -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    lo, hi = _RANGES[elem]
    return np.clip(np.round(y) + zero, lo, hi)


def _float_kept(x: np.ndarray, s: np.ndarray, z: np.ndarray, elem: int) -> np.ndarray:
    """What a QuantizeLinear left in float hands its DequantizeLinear so that it gives x back: no rounding and no
    saturation, except a ReLU the quantizer folded in (its zero point at the type's lowest value), which stays."""
    x = np.asarray(x, dtype=np.float64)
    if elem != FP8_E4M3FN and np.all(np.asarray(z) == _q_range(elem)[0]):
        x = np.maximum(x, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return x / s + (0 if elem == FP8_E4M3FN else z)


class _Kernels:
    """The reference evaluator's kernels for the quantized ops, in float64, sharing one record of activations."""

    def __init__(self, constants: set[str], elem_of: dict[str, int], forced: dict[str, np.ndarray] | None = None,
                 reference: dict[str, np.ndarray] | None = None, bypass: frozenset[str] = frozenset(),
                 via: Any = None) -> None:
        self.constants, self.elem_of, self.forced, self.via = constants, elem_of, forced or {}, via
        self.reference, self.bypass = reference or {}, bypass
        self.local: list[Local] = []
        self.activations: dict[str, Activation] = {}
        self.zero_scales: list[str] = []
        self.zeroed: list[str] = []

    def ops(self) -> list:
        from onnx.reference.op_run import OpRun
        k = self

        class QuantizeLinear(OpRun):
            op_domain = ""

            def _run(self, x, scale, zero=None, axis=1, saturate=1, block_size=0, output_dtype=0, precision=0):
                elem = k.elem_of.get(self.onnx_node.output[0]) or _zero_elem(zero, output_dtype)
                s = along(scale, axis, x.ndim, block_size, x.shape)
                z = along(zero if zero is not None else 0, axis, x.ndim, block_size, x.shape)
                if self.onnx_node.input[0] in k.bypass:  # left in float: its DequantizeLinear gives x back
                    return (_float_kept(x, s, z, elem),)
                q = quantize(x, s, z, elem, k.via)
                if not np.all((np.asarray(scale) != 0) & np.isfinite(scale)):
                    k.zero_scales.append(self.onnx_node.input[0])
                elif self.onnx_node.input[0] not in k.constants:
                    k.record(self.onnx_node.input[0], x, q, s, z, elem)
                theirs = k.forced.get(self.onnx_node.output[0])
                if theirs is not None:  # the backend's own values go on downstream; this kernel's departure is kept
                    theirs = _wide(theirs)
                    k.compare(self.onnx_node.input[0], q, theirs, elem)
                    return (theirs,)
                return (q,)

        class DequantizeLinear(OpRun):
            op_domain = ""

            def _run(self, q, scale, zero=None, axis=1, block_size=0, output_dtype=0):
                q = _wide(q)
                s = along(scale, axis, q.ndim, block_size, q.shape)
                z = along(_wide(zero) if zero is not None else 0, axis, q.ndim, block_size, q.shape)
                if self.onnx_node.input[0] in k.constants and np.any((s == 0) & (q != z)):
                    k.zeroed.append(self.onnx_node.input[0])
                with np.errstate(invalid="ignore", over="ignore"):  # a scale of inf: the model's, said apart
                    return ((q - z) * s,)

        class DynamicQuantizeLinear(OpRun):
            op_domain = ""

            def _run(self, x):
                x = np.asarray(x, dtype=np.float64)
                lo, hi = min(0.0, float(x.min(initial=0.0))), max(0.0, float(x.max(initial=0.0)))
                # the scale is a float32 output: the codes are computed with that float32 value (the spec's
                # y_scale), not the real quotient (ONNX's test_dynamicquantizelinear: a code a step apart otherwise)
                scale = float(np.float32((hi - lo) / 255.0)) or 1.0
                zero = float(np.clip(np.round(-lo / scale), 0, 255))
                return (np.clip(np.round(x / scale) + zero, 0, 255), np.float64(scale), np.float64(zero))

        class MatMulInteger(OpRun):
            op_domain = ""

            def _run(self, a, b, a_zero=None, b_zero=None):
                a = _wide(a) - (_wide(a_zero) if a_zero is not None else 0)
                bz = _wide(b_zero) if b_zero is not None else 0
                return (np.matmul(a, _wide(b) - bz),)

        class ConvInteger(OpRun):
            op_domain = ""

            def _run(self, x, w, x_zero=None, w_zero=None, auto_pad=None, dilations=None, group=None,
                     kernel_shape=None, pads=None, strides=None):
                from onnx.reference.ops.op_conv import _conv_implementation
                x = _wide(x) - (_wide(x_zero) if x_zero is not None else 0)
                wz = along(_wide(w_zero), 0, 4) if w_zero is not None else 0
                w = _wide(w) - wz
                return (_conv_implementation(x, w, None, auto_pad, dilations, group or 1, kernel_shape or
                                             w.shape[2:], pads, strides),)

        class QLinearMatMul(OpRun):
            op_domain = ""

            def _run(self, a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero):
                acc = np.matmul(_wide(a) - _wide(a_zero), _wide(b) - _column(b_zero, np.ndim(b)))
                real = acc * np.asarray(a_scale, np.float64) * _column(b_scale, np.ndim(b))
                return (quantize(real, np.asarray(y_scale, np.float64), _wide(y_zero), _elem(y_zero)),)

        class QLinearConv(OpRun):
            op_domain = ""

            def _run(self, x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, B=None, auto_pad=None,
                     dilations=None, group=None, kernel_shape=None, pads=None, strides=None):
                from onnx.reference.ops.op_conv import _conv_implementation
                wz = along(_wide(w_zero), 0, np.ndim(w))
                acc = _conv_implementation(_wide(x) - _wide(x_zero), _wide(w) - wz, None, auto_pad, dilations,
                                           group or 1, kernel_shape or np.shape(w)[2:], pads, strides)
                acc = acc + (along(_wide(B), 1, acc.ndim) if B is not None else 0)
                real = acc * np.asarray(x_scale, np.float64) * along(w_scale, 1, acc.ndim)
                return (quantize(real, np.asarray(y_scale, np.float64), _wide(y_zero), _elem(y_zero)),)

        class MatMulNBits(OpRun):
            op_domain = "com.microsoft"

            def _run(self, a, b, scales, zero_points=None, g_idx=None, bias=None, K=0, N=0, bits=4, block_size=32,
                     accuracy_level=0):
                w = unpack_nbits(b, scales, zero_points, K, N, bits, block_size)
                y = np.matmul(np.asarray(a, dtype=np.float64), w.T)
                return ((y + np.asarray(bias, dtype=np.float64)) if bias is not None else y,)

        class RunTimeQuantize(OpRun):
            op_domain = RUN_TIME_DOMAIN

            def _run(self, x, axes=None, rule=None):
                return (run_time_quantized(np.asarray(x), tuple(axes), rule.decode() if isinstance(rule, bytes)
                                           else str(rule)),)

        return [QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul,
                QLinearConv, MatMulNBits, RunTimeQuantize]

    def compare(self, name: str, ours: np.ndarray, theirs: np.ndarray, elem: int) -> None:
        """How far the backend's quantized values are from the emulation's, fed the same upstream values. A scalar
        a runtime hands back as one element (LiteRT gives a 0-d tensor shape (1,)) is the same value: shapes that
        differ only in dims of size 1 are compared squeezed; any other difference is every value away."""
        if ours.shape != theirs.shape and np.squeeze(ours).shape == np.squeeze(np.asarray(theirs)).shape:
            ours, theirs = np.squeeze(ours), np.squeeze(np.asarray(theirs))
        if ours.shape != theirs.shape:
            self.local.append(Local(name, int(ours.size), int(ours.size), float("inf")))
            return
        d = np.abs(grid_position(ours, elem) - grid_position(theirs, elem))
        d = np.where(np.isnan(d), np.inf, d)
        self.local.append(Local(name, int(d.size), int(np.count_nonzero(d >= 1)), float(d.max(initial=0.0))))

    def record(self, name: str, x: np.ndarray, q: np.ndarray, s, z, elem: int) -> None:
        """How an activation quantizer used its range on these inputs: the values it saturated, the levels used."""
        if x.size == 0:
            return
        lo, hi = _q_range(elem)
        x = np.asarray(x, dtype=np.float64)
        a = self.activations.setdefault(name, Activation(name))
        a.values += x.size
        exact = x / s + (0 if elem == FP8_E4M3FN else z)  # s > 0 here (zero scales are recorded apart)
        zero = float(np.mean(z)) if elem != FP8_E4M3FN else 0.0
        # a range that starts at zero with the zero point at the type's lowest value is a ReLU the quantizer folded
        # into this quantizer (its saturation is the ReLU): values below zero are the ReLU's work, not clipping
        folded = zero == lo
        below = 0 if folded else int(np.count_nonzero(exact < lo - 0.5))
        a.clipped += int(np.count_nonzero(exact > hi + 0.5)) + below
        a.levels = max(a.levels, int(np.unique(q).size))
        a.range = ((lo - zero) * float(np.min(s)), (hi - zero) * float(np.max(s)))
        a.seen = (min(a.seen[0], float(x.min())), max(a.seen[1], float(x.max())))
        ref = self.reference.get(name)
        if ref is not None and np.shape(ref) == x.shape:
            ref = np.asarray(ref, dtype=np.float64)
            deq = (q - (0 if elem == FP8_E4M3FN else z)) * s
            a.err2 += float(np.sum((deq - ref) ** 2))
            a.ref2 += float(np.sum(ref ** 2))


# A kernel's own quantization of a float input at run time, as a node of the emulated graph (model/tflite_qdq.py):
# RunTimeQuantize(x; axes, rule) -> x dequantized as the kernel computes with it. Rules, each in the kernel's own
# float32 (and, where it uses one, float64) arithmetic, int8, one range per slice over `axes`:
# - "xnnpack": XNNPACK's qd8 (xnn_f32_qd8_asymmetric_quantization_params): the range widened to hold 0, an inverse
#   scale 255 / range in float32, the zero point from whichever end errs less, rounded to even, x * inverse scale
#   rounded to even; the kernel dequantizes with 1 / inverse scale;
# - "tflite-asymmetric": TFLite's AsymmetricQuantizeFloats: the scale range / 255 and x / scale plus the zero point
#   in float64, rounded half away from zero; dequantized with the scale in float32 (x * (1 / scale) in float32, as
#   its portable code reads, lands a step apart on some values: 1.4e-6 from LiteRT on tinycnn_dyn_int4, against
#   1.2e-7 this way);
# - "tflite-symmetric": TFLite's SymmetricQuantizeFloats: x * (127 / max |x|) in float32, rounded half away from
#   zero, clamped to [-127, 127].
RUN_TIME_DOMAIN = "fpdiff.runtime"
RUN_TIME_RULES = ("xnnpack", "tflite-asymmetric", "tflite-symmetric")


def _round_away(v: np.ndarray) -> np.ndarray:
    """Round half away from zero (C's round, TfLiteRound)."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def run_time_quantized(x: np.ndarray, axes: tuple[int, ...], rule: str) -> np.ndarray:
    """`x` quantized to int8 at run time by the rule a kernel uses (RUN_TIME_RULES), one range per slice over
    `axes`, and dequantized with the scale the kernel multiplies by: what its integer arithmetic computes with."""
    x32 = np.asarray(x, dtype=np.float32)
    lo = np.minimum(np.float32(0), x32.min(axis=axes, keepdims=True, initial=np.inf))
    hi = np.maximum(np.float32(0), x32.max(axis=axes, keepdims=True, initial=-np.inf))
    if rule == "tflite-symmetric":
        r = np.maximum(np.abs(lo), hi)
        inv = np.where(r == 0, np.float32(1), np.float32(127) / np.where(r == 0, 1, r)).astype(np.float32)
        q = np.clip(_round_away((x32 * inv).astype(np.float32)), -127, 127)
        scale = np.where(r == 0, 1.0, (r / np.float32(127)).astype(np.float32))
        return q.astype(np.float64) * scale.astype(np.float64)
    if rule == "xnnpack":
        flat = lo == hi
        inv = np.where(flat, np.float32(1), np.float32(255) / np.where(flat, 1, hi - lo)).astype(np.float32)
        lo_s, hi_s = (lo * inv).astype(np.float32), (hi * inv).astype(np.float32)
        zp = np.where((np.float32(-128) + lo_s) + (np.float32(127) + hi_s) > 0, np.float32(-128) - lo_s,
                      np.float32(127) - hi_s)
        zp = np.rint(np.clip(zp, -128, 127))
        q = np.clip(np.rint((x32 * inv).astype(np.float32)) + zp, -128, 127)
        scale = (np.float32(1) / inv).astype(np.float32)
    elif rule == "tflite-asymmetric":
        lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
        flat = lo64 == hi64
        s64 = np.where(flat, 1.0, (hi64 - lo64) / 255.0)
        zp = np.where(flat, 0.0, np.clip(np.round(-128.0 - lo64 / s64), -128, 127))
        q = np.where(flat, 0.0, np.clip(_round_away(zp + x32.astype(np.float64) / s64), -128, 127))
        scale = s64.astype(np.float32)
    else:
        raise ValueError(f"no run-time quantization rule {rule!r} (known: {', '.join(RUN_TIME_RULES)})")
    return (q - zp).astype(np.float64) * scale.astype(np.float64)


def grid_position(q: np.ndarray, elem: int) -> np.ndarray:
    """Quantized values as positions on their grid, so a difference counts steps: integers are their own position;
    an e4m3 value its index among the finite e4m3 values (one step is one representable value)."""
    if elem != FP8_E4M3FN:
        return np.asarray(q, dtype=np.float64)
    import ml_dtypes
    bits = np.asarray(q, dtype=np.float64).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(np.int64)
    magnitude = bits & 0x7F  # e4m3fn orders its non-negative values by their bits; the sign mirrors them
    return np.where(bits & 0x80, -magnitude, magnitude).astype(np.float64)


def _zero_elem(zero: Any, output_dtype: int) -> int:
    """The quantized type of a QuantizeLinear whose output type the graph does not say: its zero point's, else the
    attribute's, else uint8 (ONNX's default)."""
    if output_dtype:
        return int(output_dtype)
    if zero is not None:
        return onnx.helper.np_dtype_to_tensor_dtype(np.asarray(zero).dtype)
    return onnx.TensorProto.UINT8


def _elem(zero: Any) -> int:
    """The quantized type a QLinear op's output has: its zero point's."""
    return onnx.helper.np_dtype_to_tensor_dtype(np.asarray(zero).dtype)


def _column(v: Any, ndim: int) -> np.ndarray:
    """QLinearMatMul's b scale or zero point: a scalar, or one per column of b (its last axis)."""
    v = _wide(v)
    return v if v.ndim == 0 or v.ndim == ndim else along(v, -1, ndim)


def _wide(v: Any) -> np.ndarray:
    """An integer or fp8 tensor as the exact float64 values it holds."""
    return np.asarray(v).astype(np.float64)


def unpack_nbits(b: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, k: int, n: int, bits: int,
                 block: int) -> np.ndarray:
    """MatMulNBits' packed weight as float64 [N, K]: 4 bits: each byte holds two values, low nibble first; 8 bits: one
    a byte. A block of `block` values along K shares one scale and one zero point (2^(bits-1) when none is given:
    symmetric); uint8 zero points are packed as the weights are."""
    if bits not in (4, 8):
        raise NotImplementedError(f"MatMulNBits with {bits} bits")
    blocks = -(-k // block)
    raw = np.asarray(b, dtype=np.uint8).reshape(n, blocks, -1)
    q = (np.stack([raw & 0x0F, raw >> 4], axis=-1).reshape(n, blocks, -1) if bits == 4 else raw)[:, :, :block]
    q = q.astype(np.float64)
    if zero_points is None:
        z = np.full((n, blocks), float(2 ** (bits - 1)))
    elif np.asarray(zero_points).dtype == np.uint8:
        zp = np.asarray(zero_points, dtype=np.uint8).reshape(n, -1)
        z = (np.stack([zp & 0x0F, zp >> 4], axis=-1).reshape(n, -1) if bits == 4 else zp)[:, :blocks]
        z = z.astype(np.float64)
    else:
        z = np.asarray(zero_points, dtype=np.float64).reshape(n, blocks)
    s = np.asarray(scales, dtype=np.float64).reshape(n, blocks)
    w = (q - z[:, :, None]) * s[:, :, None]
    return w.reshape(n, -1)[:, :k]


def wide_graph(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose float32 and float16 initializers, constants (value_float ones too), casts and declared types are
    float64, in the subgraphs (If, Loop, Scan bodies) too, the quantized tensors left as they are (the kernels read
    them as the integers they hold)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    _widen(m.graph)
    return m


_FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}


def _widen(g: onnx.GraphProto) -> None:
    """One graph and the subgraphs its nodes hold, widened in place: a branch's float32 constant meets float64 values
    from the outer graph, which no kernel adds to float32."""
    for t in g.initializer:
        if t.data_type in _FLOATS:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for node in g.node:
        if is_float_constant(node) and node.attribute[0].name != "value":  # value_float(s): a float32 literal
            value = const_value(node).astype(np.float64)
            del node.attribute[:]
            node.attribute.append(onnx.helper.make_attribute("value", numpy_helper.from_array(value)))
        for a in node.attribute:
            if a.name == "to" and a.i in _FLOATS:
                a.i = onnx.TensorProto.DOUBLE
            if a.type == a.TENSOR and a.t.data_type in _FLOATS:
                a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
        for sub in subgraphs(node):
            _widen(sub)
    for vi in [*g.input, *g.output]:
        if vi.type.tensor_type.elem_type in _FLOATS:
            vi.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    del g.value_info[:]


def emulate(model: onnx.ModelProto | str | Path, feeds: dict[str, np.ndarray],
            forced: dict[str, np.ndarray] | None = None, reference: dict[str, np.ndarray] | None = None,
            bypass: frozenset[str] = frozenset(), fp8_via: Any = None) -> Emulation:
    """The graph's outputs computed exactly in float64 (inputs widened), each output's step, the activations.
    `forced`: the backend's own values of quantized tensors (QuantizeLinear outputs, by name), which go on downstream
    in place of the emulation's, each compared with what the emulation computes from the same upstream values
    (`local`): the departure of each of the backend's kernels alone. `reference`: the float model's own float64 values
    of activation tensors, by name (float_values), each quantized activation measured against them (drift).
    `bypass`: activation tensors left in float (their QuantizeLinear and DequantizeLinear give the value back).
    `fp8_via`: a what-if of fp8's rounding (quantize's `via`), never the judge's own emulation."""
    m = with_domains(onnx.load(str(model)) if isinstance(model, (str, Path)) else model)
    kernels = _Kernels(_constants(m), quantized_outputs(m), forced, reference, frozenset(bypass), fp8_via)
    wide = wide_graph(m)
    ev = _evaluator(wide, kernels)
    if forced:
        values = ev.run(None, wide_feeds(feeds), intermediate=True)
        outs = [values[o.name] for o in wide.graph.output]
        _reached(wide, ev, values, kernels, forced)
        tail = tail32(m, values, feeds, set(forced))
    else:
        outs, tail = ev.run(None, wide_feeds(feeds)), None
    return Emulation([np.asarray(o, dtype=np.float64) if np.asarray(o).dtype.kind == "f" else np.asarray(o)
                      for o in outs], output_steps(m), list(kernels.activations.values()),
                     list(dict.fromkeys(kernels.zero_scales)), quantizer_count(m), kernels.local, tail,
                     list(dict.fromkeys(kernels.zeroed)))


def emulated_values(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of the quantized graph's exact float64 emulation, by name (emulate's arithmetic, kept whole)."""
    m = with_domains(model)
    ev = _evaluator(wide_graph(m), _Kernels(_constants(m), quantized_outputs(m)))
    return {k: np.asarray(v) for k, v in ev.run(None, wide_feeds(feeds), intermediate=True).items()}


def _evaluator(wide: onnx.ModelProto, kernels: _Kernels) -> Any:
    """The reference evaluator of a widened quantized graph: float64 kernels, the emulation's for quantized ops."""
    from fpdiff.onnxtools.evaluator import evaluator
    from fpdiff.onnxtools.graph import float64_ops
    ours = {c.__name__ for c in kernels.ops()}
    return evaluator(wide, new_ops=[o for o in float64_ops() if o.__name__ not in ours] + kernels.ops())


def _reached(m: onnx.ModelProto, ev: Any, values: dict[str, Any], kernels: _Kernels,
             forced: dict[str, np.ndarray]) -> None:
    """Each read-back kernel's departure beyond what float32 arithmetic of its inputs can reach (Local.beyond)."""
    from fpdiff.onnxtools.reach import Reach, beyond
    if len(ev.rt_nodes_) != len(m.graph.node):
        return
    reach = Reach(m, values, lambda i, fed: ev.rt_nodes_[i].run(*fed))
    pending: dict[str, list[Local]] = {}
    for k in kernels.local:
        pending.setdefault(k.tensor, []).append(k)
    for node in m.graph.node:
        theirs = forced.get(node.output[0]) if node.op_type == "QuantizeLinear" else None
        if theirs is None or not pending.get(node.input[0]):
            continue
        local, bound, x = pending[node.input[0]].pop(0), reach.bound(node.input[0]), values.get(node.input[0])
        if bound is None or x is None or local.steps == float("inf"):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        zero = values.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        elem = kernels.elem_of.get(node.output[0]) or _zero_elem(zero, attrs.get("output_dtype", 0))
        axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
        s = along(values[node.input[1]], axis, np.ndim(x), block, np.shape(x))
        z = along(zero if zero is not None else 0, axis, np.ndim(x), block, np.shape(x))
        local.beyond = beyond(grid_position(_wide(theirs), elem), np.asarray(x, dtype=np.float64),
                              np.broadcast_to(bound, np.shape(x)), _positions(s, z, elem, kernels.via))


def tail32(m: onnx.ModelProto, values: dict[str, Any], feeds: dict[str, np.ndarray], forced: set[str]
           ) -> list[np.ndarray] | None:
    """The graph's outputs computed in float32 by the reference evaluator from the dequantized values of the forced
    quantizers (rounded once to float32, as a float32 DequantizeLinear rounds) and the graph's inputs: only the ops
    after the last quantizers run, the baseline a backend's float32 tail is held to."""
    from fpdiff.onnxtools.evaluator import evaluator
    cut = {n.output[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in forced}
    made = {o: n for n in m.graph.node for o in n.output}
    need, stack = set(), [o.name for o in m.graph.output]
    while stack:
        t = stack.pop()
        if t in need:
            continue
        need.add(t)
        if t in made and t not in cut:
            stack.extend(reads(made[t]))
    nodes = [n for n in m.graph.node if any(o in need for o in n.output) and n.output[0] not in cut]
    inputs = [t for t in cut if t in need] + [i.name for i in m.graph.input if i.name in need]
    inits = [t for t in m.graph.initializer if t.name in need and t.name not in inputs]
    dtypes = {t.name: onnx.helper.tensor_dtype_to_np_dtype(t.data_type) for t in m.graph.initializer}  # no copies
    sub = onnx.helper.make_model(onnx.helper.make_graph(
        nodes, "tail", [onnx.helper.make_empty_tensor_value_info(t) for t in inputs], list(m.graph.output), inits),
        opset_imports=list(m.opset_import))
    fed = {t: np.asarray(values[t]).astype(dtypes.get(cut[t].input[1], np.float32)) for t in inputs if t in cut}
    fed.update({t: feeds[t] for t in inputs if t not in cut})
    try:
        return [np.asarray(o) for o in evaluator(sub).run(None, fed)]
    except Exception:  # noqa: BLE001 - a tail the reference evaluator cannot run alone has no baseline: FLOOR judges
        return None


def _positions(s: np.ndarray, z: np.ndarray, elem: int, via: Any = None) -> Any:
    """Float values to their grid positions under one quantizer's scale and zero point."""
    return lambda v: grid_position(quantize(v, s, z, elem, via), elem)


def activation_tensors(m: onnx.ModelProto) -> list[str]:
    """The tensors the graph quantizes at run time (a QuantizeLinear's input that no initializer or Constant holds),
    in graph order."""
    constants = _constants(m)
    return list(dict.fromkeys(n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear"
                              and n.input[0] not in constants))


def _constants(m: onnx.ModelProto) -> set[str]:
    """The values an initializer or a Constant node holds: never quantized at run time."""
    return {t.name for t in m.graph.initializer} | {o for n in m.graph.node if n.op_type == "Constant"
                                                    for o in n.output}


def wide_feeds(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs as the float64 evaluation takes them: float ones widened, the others as they are."""
    return {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feeds.items()}


def float_values(model: onnx.ModelProto | str | Path, feeds: dict[str, np.ndarray], names: Sequence[str]
                 ) -> dict[str, np.ndarray]:
    """The float model's own values of the named tensors, computed in float64 (those it has by these names)."""
    from fpdiff.onnxtools.evaluator import evaluator
    from fpdiff.onnxtools.graph import float64_ops
    m = onnx.load(str(model)) if isinstance(model, (str, Path)) else model
    made = {o for n in m.graph.node for o in n.output} | {i.name for i in m.graph.input}
    wanted = [n for n in names if n in made]
    if not wanted:
        return {}
    outs = evaluator(wide_graph(m), new_ops=float64_ops()).run(wanted, wide_feeds(feeds))
    return {n: np.asarray(v) for n, v in zip(wanted, outs) if np.asarray(v).dtype.kind == "f"}


def dequantized(m: onnx.ModelProto) -> dict[str, str]:
    """Each quantized tensor's twin: the output of the DequantizeLinear that reads its QuantizeLinear, which stands
    for it downstream (and carries its float name where the quantizer renamed it, as at a graph output)."""
    q_of = {n.output[0]: n.input[0] for n in m.graph.node if n.op_type == "QuantizeLinear"}
    return {q_of[n.input[0]]: n.output[0] for n in m.graph.node
            if n.op_type == "DequantizeLinear" and n.input[0] in q_of}


def upstream_activations(m: onnx.ModelProto, tensors: Sequence[str]) -> dict[str, list[str]]:
    """For each quantized activation, the nearest quantized activations upstream of it (the search stops at each):
    what the error arriving at its layer had already cost."""
    made_by = {o: n for n in m.graph.node for o in n.output}
    marked = set(tensors)
    twin = {d: t for t, d in dequantized(m).items() if t in marked}
    found: dict[str, list[str]] = {}
    for t in tensors:
        seen, stack, near = set(), [i for i in (made_by[t].input if t in made_by else [])], []
        while stack:
            x = stack.pop()
            if x in seen or not x:
                continue
            seen.add(x)
            hit = twin.get(x) or (x if x in marked else None)
            if hit is not None and hit != t:
                near.append(hit)
                continue
            if x in made_by:
                stack.extend(made_by[x].input)
        found[t] = list(dict.fromkeys(near))
    return found


def kernel_ops(m: onnx.ModelProto, tensors: Sequence[str]) -> dict[str, list[str]]:
    """For each quantized activation, the nodes between the dequantized values upstream of it and it, in graph order
    (op type and node name): the kernel a backend fuses into one integer op (a Conv with its Relu, a MatMul with its
    Add), or the float ops it runs there."""
    nodes = list(m.graph.node)
    made_by = {o: i for i, n in enumerate(nodes) for o in n.output}
    fixed = {t.name for t in m.graph.initializer}  # and what only constants make (a shape computed in the graph)
    for n in nodes:
        if all(not i or i in fixed for i in n.input):
            fixed.update(n.output)
    found: dict[str, list[str]] = {}
    for t in tensors:
        seen, stack, kernel = set(), [t], set()
        while stack:
            x = stack.pop()
            i = made_by.get(x)
            if x in seen or x in fixed or i is None or nodes[i].op_type == "DequantizeLinear":
                continue
            seen.add(x)
            kernel.add(i)
            stack.extend(nodes[i].input)
        found[t] = [f"{nodes[i].op_type} {nodes[i].name}".strip() for i in sorted(kernel)]
    return found


def with_domains(m: onnx.ModelProto) -> onnx.ModelProto:
    """The graph with an opset import for each domain its nodes use: NNCF writes ONNX Runtime's MatMulNBits without
    declaring com.microsoft, which ONNX Runtime and OpenVINO read anyway (version 1, the only one it has)."""
    declared = {o.domain for o in m.opset_import}
    missing = sorted({n.domain for n in m.graph.node if n.domain not in declared | {"ai.onnx"}})
    if not missing:
        return m
    m = onnx.ModelProto.FromString(m.SerializeToString())
    m.opset_import.extend(onnx.helper.make_opsetid(d, 1) for d in missing)
    return m


# the ops that hold or make quantized tensors: a graph with none of them was not quantized at all
QUANTIZED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                           "ConvInteger", "MatMulNBits", "QLinearConv", "QLinearMatMul"})


def file_format(m: onnx.ModelProto) -> str | None:
    """The quantized format a graph is in, read from its ops and types (fpdiff's names: int8, int8-dynamic,
    int4-weight, fp8); None for a float graph."""
    ops = {n.op_type for n in m.graph.node}
    types = {t.data_type for t in m.graph.initializer} | set(quantized_outputs(m).values())
    if FP8_E4M3FN in types:
        return "fp8"
    if "MatMulNBits" in ops:
        return "int4-weight"
    if "DynamicQuantizeLinear" in ops:
        return "int8-dynamic"
    return "int8" if ops & QUANTIZED_OPS else None


def quantizer_count(m: onnx.ModelProto) -> int:
    """How many nodes of the graph hold or make quantized tensors."""
    return sum(n.op_type in QUANTIZED_OPS for n in m.graph.node)


def quantized_outputs(m: onnx.ModelProto) -> dict[str, int]:
    """The element type each QuantizeLinear produces, where its zero point (or output_dtype) says it."""
    inits = {t.name: t.data_type for t in m.graph.initializer}
    consts = {n.output[0]: a.t.data_type for n in m.graph.node if n.op_type == "Constant" for a in n.attribute
              if a.type == a.TENSOR}
    found: dict[str, int] = {}
    inferred: dict[str, int] | None = None
    for n in m.graph.node:
        if n.op_type != "QuantizeLinear":
            continue
        dtype = next((a.i for a in n.attribute if a.name == "output_dtype" and a.i), 0)
        zero = n.input[2] if len(n.input) > 2 and n.input[2] else None
        if zero and not dtype and zero not in inits and zero not in consts:  # a zero point computed at run time
            inferred = _value_types(m) if inferred is None else inferred
            dtype = inferred.get(zero, 0)
        # no zero point and no output_dtype: ONNX's default, uint8
        found[n.output[0]] = dtype or (inits.get(zero) or consts.get(zero) if zero else 0) or onnx.TensorProto.UINT8
    return found


def _value_types(m: onnx.ModelProto) -> dict[str, int]:
    """The element type of each value of the graph, by ONNX's type inference (a dynamic quantizer's zero point)."""
    try:
        graph = onnx.shape_inference.infer_shapes(m).graph
    except Exception:  # inference refused (a contrib op): what it could not type stays unknown
        return {}
    return {v.name: v.type.tensor_type.elem_type for v in [*graph.value_info, *graph.output, *graph.input]}


def output_steps(m: onnx.ModelProto) -> list[float | None]:
    """Each graph output's quantization step: the scale of the per-tensor DequantizeLinear that makes it."""
    made = {o: n for n in m.graph.node for o in n.output}
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    inits.update({n.output[0]: numpy_helper.to_array(a.t) for n in m.graph.node if n.op_type == "Constant"
                  for a in n.attribute if a.type == a.TENSOR})  # a scale exporters write as a Constant node
    steps: list[float | None] = []
    for out in m.graph.output:
        node = made.get(out.name)
        scale = inits.get(node.input[1]) if node is not None and node.op_type == "DequantizeLinear" else None
        steps.append(float(scale) if scale is not None and np.asarray(scale).size == 1 else None)
    return steps


def feeds_of(m: onnx.ModelProto, inputs: Sequence[Any]) -> dict[str, np.ndarray]:
    """The graph's inputs (initializers that double as inputs left out) fed from `inputs` in order."""
    inits = {t.name for t in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    return {n: np.asarray(v) for n, v in zip(names, inputs)}


def marked_quantizers(m: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """A copy whose activation quantizers' outputs (QuantizeLinear of a value computed at run time) are also graph
    outputs, typed as quantized: what a backend's run is read back by, tensor by tensor."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    constants = {t.name for t in m.graph.initializer} | {o for n in m.graph.node if n.op_type == "Constant"
                                                          for o in n.output}
    kinds = quantized_outputs(m)
    present = {o.name for o in m.graph.output}
    names = [n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in constants
             and n.output[0] not in present and kinds.get(n.output[0]) in QUANTIZED_TYPES]
    for name in names:
        wide = _READABLE.get(kinds[name])
        if wide is None:
            out.graph.output.append(onnx.helper.make_tensor_value_info(name, kinds[name], None))
            continue
        # 4-bit values: no runtime hands them to numpy as they are (ONNX Runtime has no numpy type for Int4x2,
        # OpenVINO returns them packed two to a byte), so the same codes are read through a Cast to 8 bits
        out.graph.node.append(onnx.helper.make_node("Cast", [name], [name + WIDE_SUFFIX], to=wide))
        out.graph.output.append(onnx.helper.make_tensor_value_info(name + WIDE_SUFFIX, wide, None))
    return out, names


# the 4-bit quantized types a read-back reads through a Cast to the 8-bit type holding the same codes
_READABLE = {onnx.TensorProto.INT4: onnx.TensorProto.INT8, onnx.TensorProto.UINT4: onnx.TensorProto.UINT8}
WIDE_SUFFIX = "__fpdiff_8bit"


def read_back(m: onnx.ModelProto, outs: Sequence[Any], run_marked: Any) -> dict[str, np.ndarray] | None:
    """The backend's own values of every activation quantizer: `run_marked(model)` runs the copy with them marked as
    outputs (marked_quantizers) the backend's way and returns all its outputs. Kept only where the marked run's own
    outputs are the cell's `outs` bit for bit (marking a value as an output can stop a fusion, and then the values
    are another program's): None then, or when the graph quantizes no activation. fp8 values as the float32 numbers
    they are (exact), whatever a runtime hands them back as (e4m3 bit patterns in uint8)."""
    marked, names = marked_quantizers(m)
    if not names:
        return None
    values = run_marked(marked)
    if not all(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) for a, b in zip(outs, values)):
        return None
    kinds = quantized_outputs(m)
    return {n: held(v, kinds.get(n) == FP8_E4M3FN) for n, v in zip(names, values[len(outs):])}


def held(v: Any, fp8: bool) -> np.ndarray:
    """A quantized value a runtime handed back, as the numbers it holds."""
    a = np.asarray(v)
    if not fp8:
        return a
    import ml_dtypes
    return (a.view(ml_dtypes.float8_e4m3fn) if a.dtype == np.uint8 else a).astype(np.float32)
