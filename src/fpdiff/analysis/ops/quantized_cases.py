"""The quantized vocabulary as op cases: ONNX's quantized ops (QuantizeLinear and DequantizeLinear in every integer
type, fp8, per tensor, per axis on every axis and blocked; QLinearMatMul, QLinearConv, MatMulInteger and ConvInteger
after DynamicQuantizeLinear) and ONNX Runtime's MatMulNBits, each at the corners where kernels part (zero points at
the ends of the range, saturation, exact ties in rounding, requantization multipliers far above and far below 1);
and the catalog's float ops wrapped in QDQ by ONNX Runtime's own quantizer, calibrated on the case's own inputs.

Each case is a quantized graph judged against its exact float64 emulation (analysis/ops/quantized.py); where the
graph has a float twin (the same op with its quantizers left out, or the catalog's own graph) the twin's float64 is
the truth the format's cost is measured against. Inputs are float and enter through a QuantizeLinear, so the
backend's quantized values are read back and each kernel is judged alone, in steps."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.analysis.ops.case import ONNX_CATALOG, Case, OnnxSample

QUANTIZED, QDQ = "quantized", "qdq"  # the variants of quantized graphs
# the variant whose cases each backend quantizes with its own quantizer (analysis/ops/quantized.py)
BY_BACKEND = "quantize"
OPSET = 21  # int4, uint4 and blocked quantization need 21
MS_DOMAIN = "com.microsoft"
# a scale that is a power of two: x / scale is exact in float32 and float64 alike, so a tie the case places at
# (k + 0.5) * scale is a tie for every backend, and only its rounding rule decides it (half to even)
TIE_SCALE = 0.25


def _t():
    from onnx import TensorProto
    return TensorProto


def _types() -> list[tuple[str, int, int, int]]:
    """(name, ONNX element type, lowest code, highest code) of the quantized types a QuantizeLinear makes."""
    T = _t()
    return [("int8", T.INT8, -128, 127), ("uint8", T.UINT8, 0, 255), ("int16", T.INT16, -32768, 32767),
            ("uint16", T.UINT16, 0, 65535), ("int4", T.INT4, -8, 7), ("uint4", T.UINT4, 0, 15)]


def _const(name: str, elem: int, values: Any, dims: tuple = ()) -> Any:
    """An initializer of any element type, int4 and fp8 included, stored as quantizers store them (raw bytes)."""
    from onnx import helper, numpy_helper
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    return numpy_helper.from_array(np.asarray(values, dtype=np.float64).astype(dtype).reshape(dims), name)


def _f32(name: str, values: Any) -> Any:
    a = np.asarray(values, dtype=np.float32)
    return _const(name, _t().FLOAT, a, a.shape)


def _model(nodes: list, feeds: dict[str, np.ndarray], inits: list, outputs: list[str], ms: tuple = ()) -> Any:
    """A checked graph at OPSET, float32 outputs; `ms`: the output's shape of a graph of com.microsoft ops (no ONNX
    schema infers it)."""
    import onnx
    from onnx import helper
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
           for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(n, _t().FLOAT, list(ms) or None) for n in outputs]
    opsets = [helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(MS_DOMAIN, 1)] if ms else [])
    model = helper.make_model(helper.make_graph(nodes, "fpdiff_quantized", ins, outs, initializer=inits),
                              opset_imports=opsets)
    model.ir_version = 10
    if not ms:  # contrib ops have no ONNX schema to check against
        model = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        onnx.checker.check_model(model)
    return model


def _case(op: str, k: int, model: Any, feeds: dict, note: str, twin: Any = None, variant: str = QUANTIZED) -> Case:
    shapes = ", ".join(str(list(a.shape)) for a in feeds.values())
    return Case(ONNX_CATALOG, op, f"{op}~{variant}-{k}", variant, f"{variant}: {shapes}, {note}", False,
                OnnxSample(model, dict(feeds), float_model=twin, quantized=True))


def _identity(feeds: dict) -> Any:
    from onnx import helper
    return _model([helper.make_node("Identity", ["X"], ["Y"])], feeds, [], ["Y"])


def _qdq(x: str, y: str, scale: str, zero: str | None, **attrs: Any) -> list:
    from onnx import helper
    ins = [x, scale] + ([zero] if zero else [])
    dq = [f"{x}_q", scale] + ([zero] if zero else [])
    return [helper.make_node("QuantizeLinear", ins, [f"{x}_q"], **attrs),
            helper.make_node("DequantizeLinear", dq, [y], **attrs)]


# ---------------------------------------------------------------------------------------------------------------
# QuantizeLinear -> DequantizeLinear


def _pairs(seed: int) -> list[Case]:
    """Every integer type and fp8 per tensor at its corners: exact ties, saturation both ways, the zero point at each
    end of the range."""
    rng = np.random.default_rng([seed, 21])
    out: list[Case] = []
    for name, elem, lo, hi in _types():
        span = hi - lo
        mid = (lo + hi + 1) // 2
        ties = (np.arange(-8, 8) + 0.5) * TIE_SCALE  # every code between mid-8 and mid+8 a tie
        corners = [
            ("ties", mid, TIE_SCALE, np.tile(ties, 4).reshape(4, 16),
             f"x exactly halfway between codes (scale {TIE_SCALE}): half to even decides"),
            ("saturate", mid, 4.0 / min(span, 255), rng.uniform(-12, 12, (4, 16)),
             "x three times past both ends of the range: saturated, never wrapped"),
            ("zero-at-lowest", lo, 4.0 / min(span, 255), rng.uniform(-1, 5, (4, 16)),
             f"zero point {lo}, the lowest code: negatives clamp to it (a folded ReLU)"),
            ("zero-at-highest", hi, 4.0 / min(span, 255), rng.uniform(-5, 1, (4, 16)),
             f"zero point {hi}, the highest code: positives clamp to it"),
        ]
        for corner, zero, scale, x, note in corners:
            feeds = {"X": x.astype(np.float32)}
            inits = [_f32("s", scale), _const("z", elem, zero)]
            model = _model(_qdq("X", "Y", "s", "z"), feeds, inits, ["Y"])
            out.append(_case("QuantizeLinear", len(out), model, feeds, f"{name} {corner}: {note}", _identity(feeds)))
    out += _fp8(rng, len(out))
    return out


def _fp8(rng: np.random.Generator, k: int) -> list[Case]:
    """float8 e4m3fn: values halfway between e4m3 neighbours (ties to even mantissa) and past 448 (saturated)."""
    grid = np.array([1.0, 1.125, 1.25, 1.375, 1.5, 2.0, 2.25, 2.5, 3.0, 3.5, 64.0, 72.0, 80.0, 96.0, 112.0, 128.0])
    halves = (grid[:-1] + grid[1:]) / 2  # exactly between neighbours, or a grid value where they are 2x apart
    ties = np.concatenate([halves, -halves, [0.0, 0.0]])[:32].reshape(2, 16)
    out = []
    for corner, x, note in (("ties", ties, "x halfway between e4m3 neighbours: ties to even mantissa"),
                            ("saturate", rng.uniform(-1200, 1200, (2, 16)), "x past 448: saturated to +-448")):
        feeds = {"X": x.astype(np.float32)}
        inits = [_f32("s", 1.0), _const("z", _t().FLOAT8E4M3FN, 0.0)]
        model = _model(_qdq("X", "Y", "s", "z"), feeds, inits, ["Y"])
        out.append(_case("QuantizeLinear", k + len(out), model, feeds, f"float8e4m3fn {corner}: {note}",
                         _identity(feeds)))
    return out


AXES_SHAPE = (2, 3, 4, 5)


def _axes(seed: int) -> list[Case]:
    """Per-axis quantization on every axis of a 4-D tensor (int8 and uint8), and blocked quantization along a middle
    and the last axis with a ragged last block (int8 and int4): a scale read along the wrong axis, or a block
    boundary off by one, puts every element of a slice on another grid."""
    rng = np.random.default_rng([seed, 22])
    x = rng.standard_normal(AXES_SHAPE).astype(np.float32) * 3
    feeds = {"X": x}
    out: list[Case] = []
    for name, elem, lo, hi in [t for t in _types() if t[0] in ("int8", "uint8")]:
        for axis in range(len(AXES_SHAPE)):
            n = AXES_SHAPE[axis]
            scales = np.round(np.geomspace(0.01, 0.1, n), 4)
            zeros = rng.integers(lo + 20, hi - 20, n)
            inits = [_f32("s", scales), _const("z", elem, zeros, (n,))]
            model = _model(_qdq("X", "Y", "s", "z", axis=axis), feeds, inits, ["Y"])
            out.append(_case("QuantizeLinear", len(out), model, feeds,
                             f"{name} per axis {axis}: scales {scales.tolist()}", _identity(feeds)))
    for name, elem, lo, hi in [t for t in _types() if t[0] in ("int8", "int4")]:
        for axis, block in ((1, 2), (3, 2)):
            shape = list(AXES_SHAPE)
            shape[axis] = -(-shape[axis] // block)
            scales = np.round(rng.uniform(0.02, 0.6, shape), 4).astype(np.float32)
            zeros = rng.integers(lo // 2, hi // 2 + 1, shape)
            inits = [_f32("s", scales), _const("z", elem, zeros, tuple(shape))]
            model = _model(_qdq("X", "Y", "s", "z", axis=axis, block_size=block), feeds, inits, ["Y"])
            out.append(_case("QuantizeLinear", len(out), model, feeds,
                             f"{name} blocked along axis {axis}, block {block} (the last block ragged)",
                             _identity(feeds)))
    return out


# ---------------------------------------------------------------------------------------------------------------
# QLinearMatMul and QLinearConv (QOperator), after a QuantizeLinear of the float input


# Requantization multipliers (sa * sw / sy) where fixed-point kernels part: 8 (above 1, where a kernel built for
# multipliers below 1 shifts the wrong way) with small sums that stay in range, and far below 1 (3e-5 for a matmul of
# 256 terms, 1e-4 for a convolution) with large same-sign sums, so the outputs still span dozens of codes
LARGE, TINY_MATMUL, TINY_CONV = 8.0, 3e-5, 1e-4


def _off_grid(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The float weights a quantizer would have rounded to `w`'s codes: each within half a step of its code, so the
    twin is a float model and the format's cost includes its weights' rounding, as on a real model (a twin on the
    grid would cost nothing, and then any rounding a runtime adds of its own, such as OpenVINO's run-time int8
    activations for compressed weights, would weigh as a mismatch)."""
    return w + rng.uniform(-0.5, 0.5, w.shape)


def _setting(label: str, rng: np.random.Generator, xshape: tuple, wshape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(x, integer weights) for one multiplier setting: normal x and weights over the int8 range; tiny x and
    weights in {-1, 0, 1} for a large multiplier; positive x and weights for a tiny one."""
    if label == "large":
        return (rng.standard_normal(xshape) * 0.05).astype(np.float32), rng.integers(-1, 2, wshape).astype(float)
    if label == "tiny":
        return rng.uniform(0, 2, xshape).astype(np.float32), rng.integers(0, 128, wshape).astype(float)
    return rng.standard_normal(xshape).astype(np.float32), rng.integers(-127, 128, wshape).astype(float)


def _sy(label: str, sa: float, sw: float, tiny: float, real: np.ndarray) -> tuple[float, int, str]:
    """The output scale and zero point of a setting, and its words."""
    if label == "large":
        return sa * sw / LARGE, 128, f"requantization multiplier {LARGE:g}"
    if label == "tiny":
        return sa * sw / tiny, 0, f"requantization multiplier {tiny:g}"
    return float(np.abs(real).max() * 2 / 255), 128, "output scale from its range"


def _qlinear(seed: int) -> list[Case]:
    from onnx import helper
    rng = np.random.default_rng([seed, 23])
    out: list[Case] = []
    sa, za = 4.0 / 255, 128  # x in [-2, 2]
    for per_column in (False, True):
        for label in ("range", "large", "tiny"):
            k = 256 if label == "tiny" else 32
            x, w = _setting(label, rng, (3, k), (k, 8))
            sw = np.round(rng.uniform(0.002, 0.02, 8), 5) if per_column else np.array(0.01)
            wf = _off_grid(w, rng) * sw
            sy, zy, words = _sy(label, sa, float(np.max(sw)), TINY_MATMUL, x @ wf)
            feeds = {"X": x}
            inits = [_f32("sa", sa), _const("za", _t().UINT8, za), _const("w", _t().INT8, w, w.shape),
                     _f32("sw", sw), _const("zw", _t().INT8, np.zeros(np.shape(sw)), np.shape(sw)),
                     _f32("sy", sy), _const("zy", _t().UINT8, zy)]
            nodes = [helper.make_node("QuantizeLinear", ["X", "sa", "za"], ["xq"]),
                     helper.make_node("QLinearMatMul", ["xq", "sa", "za", "w", "sw", "zw", "sy", "zy"], ["yq"]),
                     helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["Y"])]
            twin = _model([helper.make_node("MatMul", ["X", "wf"], ["Y"])], feeds, [_f32("wf", wf)], ["Y"])
            out.append(_case("QLinearMatMul", len(out), _model(nodes, feeds, inits, ["Y"]), feeds,
                             f"uint8 x int8 {'per column' if per_column else 'per tensor'}, {words}", twin))
    # 16 output channels on 16 input channels: a per-channel weight scale read along the input-channel axis fits
    # the shape there, and computes wrong numbers where another count of channels is refused (findings/ops-022)
    convs = ((1, 6, 1, "group 1"), (2, 6, 2, "group 2, stride 2"), (16, 16, 1, "depthwise"),
             (1, 16, 1, "group 1, 16 channels in and out"))
    for group, oc, stride, shape in convs:
        for label in ("range", "large", "tiny"):
            x, wc = _setting(label, rng, (1, 16, 9, 9), (oc, 16 // group, 3, 3))
            sw = np.round(rng.uniform(0.002, 0.02, oc), 5)
            bias = rng.integers(-2000, 2000, oc)
            wf = _off_grid(wc, rng) * sw[:, None, None, None]
            conv = {"pads": [1, 1, 1, 1], "strides": [stride, stride], "group": group}
            sy, zy, words = _sy(label, sa, float(sw.max()), TINY_CONV, np.array([12.0]))
            feeds = {"X": x}
            inits = [_f32("sa", sa), _const("za", _t().UINT8, za), _const("w", _t().INT8, wc, wc.shape),
                     _f32("sw", sw), _const("zw", _t().INT8, np.zeros(oc), (oc,)), _f32("sy", sy),
                     _const("zy", _t().UINT8, zy), _const("b", _t().INT32, bias, (oc,))]
            nodes = [helper.make_node("QuantizeLinear", ["X", "sa", "za"], ["xq"]),
                     helper.make_node("QLinearConv", ["xq", "sa", "za", "w", "sw", "zw", "sy", "zy", "b"], ["yq"],
                                      **conv),
                     helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["Y"])]
            twin = _model([helper.make_node("Conv", ["X", "wf", "bf"], ["Y"], **conv)], feeds,
                          [_f32("wf", wf), _f32("bf", bias * sa * sw)], ["Y"])
            out.append(_case("QLinearConv", len(out), _model(nodes, feeds, inits, ["Y"]), feeds,
                             f"uint8 x int8 per channel, int32 bias, pads 1, {shape}, {words}", twin))
    return out


# ---------------------------------------------------------------------------------------------------------------
# dynamic quantization (ONNX Runtime's quantize_dynamic pattern) and 4-bit/8-bit weights


def _dynamic(seed: int) -> list[Case]:
    """DynamicQuantizeLinear -> MatMulInteger / ConvInteger -> Cast -> Mul by both scales: the range measured at
    run time, weights int8 (zero point 0) and uint8 (zero point off 0)."""
    from onnx import helper
    rng = np.random.default_rng([seed, 24])
    out: list[Case] = []
    for op, xshape, wshape in (("MatMulInteger", (3, 32), (32, 8)), ("ConvInteger", (1, 4, 9, 9), (6, 4, 3, 3))):
        x = rng.standard_normal(xshape).astype(np.float32)
        for elem, zw, label in ((_t().INT8, 0, "int8 weights, zero point 0"),
                                (_t().UINT8, 131, "uint8 weights, zero point 131")):
            w = rng.integers(0, 256, wshape) if elem == _t().UINT8 else rng.integers(-127, 128, wshape)
            sw = 0.01
            feeds = {"X": x}
            inits = [_const("w", elem, w, wshape), _const("zw", elem, zw), _f32("sw", sw)]
            kernel = helper.make_node(op, ["xq", "w", "xz", "zw"], ["acc"])
            nodes = [helper.make_node("DynamicQuantizeLinear", ["X"], ["xq", "xs", "xz"]), kernel,
                     helper.make_node("Cast", ["acc"], ["accf"], to=_t().FLOAT),
                     helper.make_node("Mul", ["xs", "sw"], ["s"]), helper.make_node("Mul", ["accf", "s"], ["Y"])]
            wf = (_off_grid(w.astype(np.float64), rng) - zw) * sw
            float_op = helper.make_node("MatMul" if op == "MatMulInteger" else "Conv", ["X", "wf"], ["Y"])
            twin = _model([float_op], feeds, [_f32("wf", wf)], ["Y"])
            out.append(_case(op, len(out), _model(nodes, feeds, inits, ["Y"]), feeds,
                             f"after DynamicQuantizeLinear, {label}", twin))
    return out


def _pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """MatMulNBits' packing of [N, blocks, block] codes: 4 bits two to a byte, low nibble first."""
    if bits == 8:
        return codes.astype(np.uint8)
    c = codes.astype(np.uint8).reshape(*codes.shape[:-1], -1, 2)
    return (c[..., 0] | (c[..., 1] << 4)).astype(np.uint8)


def _nbits(seed: int) -> list[Case]:
    """ONNX Runtime's MatMulNBits: 4 and 8 bits, blocks of 16 and 32, with and without zero points (without: the
    middle code, symmetric)."""
    from onnx import helper
    rng = np.random.default_rng([seed, 25])
    k, n = 64, 8
    a = rng.standard_normal((3, k)).astype(np.float32)
    out: list[Case] = []
    for bits, block, zeros in ((4, 32, False), (4, 16, True), (8, 32, False), (8, 16, True)):
        blocks = k // block
        codes = rng.integers(0, 2 ** bits, (n, blocks, block))
        scales = rng.uniform(0.005, 0.05, (n, blocks)).astype(np.float32)
        zp = rng.integers(0, 2 ** bits, (n, blocks)) if zeros else np.full((n, blocks), 2 ** (bits - 1))
        w = ((_off_grid(codes, rng) - zp[:, :, None]) * scales[:, :, None].astype(np.float64)).reshape(n, k)
        feeds = {"A": a}
        inits = [_const("b", _t().UINT8, _pack(codes, bits), (n, blocks, block * bits // 8)),
                 _f32("sc", scales.ravel())]
        ins = ["A", "b", "sc"]
        if zeros:
            packed = _pack(zp[:, :, None].reshape(n, -1), bits) if bits == 8 else \
                _pack(np.pad(zp, ((0, 0), (0, blocks % 2))), 4)
            inits.append(_const("zp", _t().UINT8, packed, packed.shape))
            ins.append("zp")
        node = helper.make_node("MatMulNBits", ins, ["Y"], domain=MS_DOMAIN, K=k, N=n, bits=bits, block_size=block)
        twin = _model([helper.make_node("MatMul", ["A", "wt"], ["Y"])], feeds, [_f32("wt", w.T)], ["Y"])
        out.append(_case("com.microsoft.MatMulNBits", len(out), _model([node], feeds, inits, ["Y"], ms=(3, n)), feeds,
                         f"{bits} bits, block {block}, {'zero points' if zeros else 'symmetric'}", twin))
    return out


def quantized_cases(seed: int) -> list[Case]:
    """The purpose-built quantized vocabulary (the `quantized` variant), numbered per op."""
    import dataclasses
    out, count = [], {}
    for c in _pairs(seed) + _axes(seed) + _qlinear(seed) + _dynamic(seed) + _nbits(seed):
        k = count[c.op] = count.get(c.op, -1) + 1
        out.append(dataclasses.replace(c, case_id=f"{c.op}~{QUANTIZED}-{k}"))
    return out


# ---------------------------------------------------------------------------------------------------------------
# the catalog's float ops wrapped in QDQ by ONNX Runtime's quantizer


def qdq_case(case: Case, seed: int) -> list[Case]:
    """The catalog case quantized as ONNX Runtime's users quantize a model (quantize_static, QDQ, per channel, uint8
    activations and int8 weights, MinMax) calibrated on the case's own inputs; its float graph is the twin. An op
    the quantizer leaves float makes no case."""
    del seed
    s: OnnxSample = case.payload
    if not isinstance(s, OnnxSample) or s.quantized or s.model.functions or \
            any(a.dtype.kind != "f" for a in s.inputs.values()):
        return []
    model = ort_quantized(s.model, s.inputs)
    if model is None or not any(n.op_type == "QuantizeLinear" for n in model.graph.node):
        return []
    return [Case(ONNX_CATALOG, case.op, f"{case.case_id}~{QDQ}", QDQ,
                 f"{case.description} | {QDQ}: onnxruntime quantize_static (QDQ, uint8/int8, per channel, MinMax on "
                 "its own inputs)", False, OnnxSample(model, dict(s.inputs), float_model=s.model, quantized=True,
                                                      quantized_by=ORT_QUANTIZER))]


# the quantizer of the qdq variant and the fuzzer's qdq form: what their quantized graphs' own errors are pinned on
ORT_QUANTIZER = "onnxruntime.quantization"


def ort_quantized(model: Any, feeds: dict[str, np.ndarray]) -> Any:
    """`model` quantized by ONNX Runtime's quantizer as quant's int8 cells are (onnxtools/quantize.py), calibrated
    on `feeds` alone; None where the quantizer refuses it or quantizes nothing."""
    import onnx

    from fpdiff.onnxtools.emulate import quantizer_count
    from fpdiff.onnxtools.quantize import quantize_graph
    with tempfile.TemporaryDirectory(prefix="fpdiff-qdq-") as tmp:
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "qdq.onnx"
        onnx.save(model, str(src))
        try:
            quantize_graph(src, dst, "int8", [tuple(feeds.values())])
            made = onnx.load(str(dst))
        except Exception:  # noqa: BLE001 - the quantizer's refusal: the caller says what it makes of none
            return None
    return made if quantizer_count(made) else None
