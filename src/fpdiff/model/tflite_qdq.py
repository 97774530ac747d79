"""A quantized .tflite read as the QDQ ONNX graph fpdiff emulates exactly in float64: each tensor the file holds in
integers is a QuantizeLinear of the float value its op computes from dequantized inputs, with the file's own scales
and zero points (per channel where the file has them), and every op keeps TFLite's own layout (NHWC; convolutions
and pools are transposed around their ONNX twin and back), so each ONNX tensor is the file's tensor of the same name,
value for value: what a read-back of the file is compared to. An op fpdiff has no emulation of is the emulation's
error, named."""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.core.errors import EMULATE, StageError
from fpdiff.onnxtools.weights import TFLITE_WEIGHTS

COMPONENT = "fpdiff's emulation (the .tflite read as a QDQ graph)"
READER = "7"  # in the cache key of a graph read from a file: a change in how a file is read makes it again
OPSET = 21
# TFLite's tensor types fpdiff reads (schema TensorType), as numpy dtypes and ONNX element types
_NUMPY = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 6: np.bool_, 7: np.int16, 9: np.int8,
          17: np.int8}  # INT4: two values a byte, the first in the low nibble, read widened to int8
INT4 = 17
_ACTIVATION = {1: ("Relu", None), 2: ("Clip", (-1.0, 1.0)), 3: ("Clip", (0.0, 6.0)), 4: ("Tanh", None)}


def is_quantized(path: Path) -> str | None:
    """The file's quantized format as fpdiff names it, or None (float, or fp16 weights): int8 where activations are
    held in integers; int8-dynamic where an op takes integer weights as they are with a float input (a
    dynamic-range kernel quantizes it at run time); weights alone in integers, widened to float before each op
    (weight-only): int4-weight where any is 4-bit, int8 otherwise (as an ONNX file's weight-only QDQ is named)."""
    g = _Reader(Path(path))
    if any(i not in g.constants and _scaled(t) for i, t in enumerate(g.sub.tensors)):
        return "int8"
    if any(len(op.inputs) > 1 and min(op.inputs[:2]) >= 0 and _hybrid(g, [int(i) for i in op.inputs])
           for op in g.sub.operators if g.op_name(op) in WEIGHTED_OPS):
        return "int8-dynamic"
    weights = [t for i, t in enumerate(g.sub.tensors) if i in g.constants and _scaled(t)]
    if not weights:
        return None
    return "int4-weight" if any(t.type == INT4 for t in weights) else "int8"


def write(path: Path, out: Path, xnnpack: set[int] | None = None) -> list[str]:
    """The QDQ ONNX graph of the quantized .tflite at `path`, written to `out`; -> the names of the file's tensors
    that are activation quantizers in it (each a QuantizeLinear output named as the file names the tensor).
    `xnnpack`: the indices of the ops XNNPACK runs (a dynamic-range op quantizes its input as its kernel does);
    None: all of them."""
    import json

    import onnx
    reader = _Reader(Path(path), xnnpack)
    graph = reader.graph()
    domains = sorted({n.domain for n in graph.node if n.domain})  # the emulation's own kernels (RunTimeQuantize)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET),
                                                         *(onnx.helper.make_opsetid(d, 1) for d in domains)],
                                   producer_name="fpdiff (from a .tflite)")
    onnx.helper.set_model_props(model, {WEIGHTS_KEY: json.dumps(reader.weights)})
    onnx.save(model, str(out))
    return [n.output[0] for n in graph.node if n.op_type == "QuantizeLinear"]


def index_of(name: str) -> int:
    """The file's tensor index of a name this module gave it (`NAME#INDEX`)."""
    return int(name.rsplit("#", 1)[1])


def dtype_of(t: Any) -> Any:
    """A tensor's numpy dtype."""
    return _NUMPY[t.type]


def _dims(t: Any) -> list[int]:
    """A tensor's shape as the file declares it (a scalar declares none)."""
    return [int(d) for d in t.shape] if t.shape is not None else []


def _scaled(t: Any) -> bool:
    """Whether a tensor is held in integers with a scale."""
    q = t.quantization
    if q is not None and _blocks(t) is not None:
        return True
    return q is not None and q.scale is not None and len(q.scale) > 0 and t.type in (3, 7, 9, 2, INT4)


def _blocks(t: Any) -> Any:
    """A weight's blockwise quantization (ai-edge-quantizer's blocks along the last axis), or None."""
    q = t.quantization
    details = getattr(q, "details", None) if q is not None else None
    return details if details is not None and hasattr(details, "blockSize") else None


def _unpacked(data: bytes, count: int) -> np.ndarray:
    """INT4 values from TFLite's packing (two a byte, the first in the low nibble), sign-extended to int8."""
    b = np.frombuffer(data, np.uint8)
    nibbles = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(-1)[:count].astype(np.int8)
    return np.where(nibbles > 7, nibbles - 16, nibbles).astype(np.int8)


class _Reader:
    """One .tflite's first subgraph, turned op by op into ONNX nodes."""

    def __init__(self, path: Path, xnnpack: set[int] | None = None) -> None:
        from ai_edge_litert import schema_py_generated as schema
        self.xnnpack = xnnpack
        raw = path.read_bytes()
        self.schema = schema
        self.model = schema.ModelT.InitFromPackedBuf(raw, 0)
        self.raw = raw
        self.sub = self.model.subgraphs[0]
        self.constants = {i for i, t in enumerate(self.sub.tensors) if self._data(t) is not None}
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.floats: dict[int, str] = {}  # a tensor's float value, once made
        self.at = -1  # the index of the op being read
        # each weighted op by its output tensor's name in the file (its scope in ai-edge-quantizer's recipes): the
        # op type and the graph's name of its weight's float value (a constant, or its DequantizeLinear's output)
        self.weights: dict[str, list[str]] = {}
        self.codes = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
        self._n = 0

    def graph(self) -> Any:
        import onnx
        inputs, outputs = [], []
        for i in self.sub.inputs:
            t = self.sub.tensors[i]
            inputs.append(onnx.helper.make_tensor_value_info(self.name(i) + (":in" if _scaled(t) else ""),
                                                             1 if _scaled(t) else self.onnx_type(t),
                                                             _dims(t)))
            if _scaled(t):  # the model's float input, quantized as the file's first step takes it (as fed)
                self.quantize(i, self.name(i) + ":in")
            else:
                self.floats[i] = self.name(i)
        for at, op in enumerate(self.sub.operators):
            self.at = at
            self.op(op)
        for i in self.sub.outputs:
            t = self.sub.tensors[i]
            name = self.float(i)  # an integer output, dequantized with the file's own scale (as read)
            outputs.append(onnx.helper.make_tensor_value_info(name, 1 if _scaled(t) else self.onnx_type(t),
                                                              _dims(t)))
        return onnx.helper.make_graph(self.nodes, "tflite", inputs, outputs, self.inits)

    # -- tensors --------------------------------------------------------------------------------------------------

    def name(self, i: int) -> str:
        t = self.sub.tensors[i]
        raw = t.name.decode() if isinstance(t.name, bytes) else str(t.name)
        return f"{raw}#{i}"

    def onnx_type(self, t: Any) -> int:
        from onnx.helper import np_dtype_to_tensor_dtype
        return int(np_dtype_to_tensor_dtype(np.dtype(_NUMPY[t.type])))

    def _data(self, t: Any) -> np.ndarray | None:
        buf = self.model.buffers[t.buffer] if t.buffer < len(self.model.buffers) else None
        if buf is None:
            return None
        if buf.data is not None and len(buf.data):
            data = bytes(np.asarray(buf.data, np.uint8))
        elif getattr(buf, "offset", 0) and buf.offset > 1:
            data = self.raw[buf.offset:buf.offset + buf.size]
        else:
            return None
        if t.type not in _NUMPY:
            raise StageError(EMULATE, COMPONENT, f"a constant of TFLite type {t.type} is not read")
        if t.type == INT4:
            return _unpacked(data, int(np.prod(_dims(t)))).reshape(_dims(t))
        return np.frombuffer(data, _NUMPY[t.type]).reshape(_dims(t))

    def constant(self, i: int) -> np.ndarray:
        data = self._data(self.sub.tensors[i])
        if data is None:
            raise StageError(EMULATE, COMPONENT, f"{self.name(i)} is read as a constant and holds no data")
        return data

    def init(self, value: np.ndarray, hint: str) -> str:
        from onnx import numpy_helper
        self._n += 1
        name = f"{hint}:c{self._n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, domain: str = "", **attrs: Any) -> str:
        import onnx
        self._n += 1
        out = out or f"{op}:{self._n}"
        self.nodes.append(onnx.helper.make_node(op, inputs, [out], name=f"{op}_{self._n}", domain=domain, **attrs))
        return out

    def params(self, i: int) -> tuple[str, str, dict[str, int]]:
        """(scale, zero point, QuantizeLinear's axis and block size) of a tensor held in integers."""
        t = self.sub.tensors[i]
        q = t.quantization
        blocks = _blocks(t)
        name = self.name(i)
        if blocks is not None:  # one scale per block of the last axis, in a tensor of its own (float16)
            if blocks.zeroPoints is not None and blocks.zeroPoints >= 0:
                raise StageError(EMULATE, COMPONENT, f"{name}: blockwise zero points are not read")
            scale = self.constant(int(blocks.scales)).astype(np.float32)
            zero = np.zeros(scale.shape, np.int8)
            return self.init(scale, name + ":scale"), self.init(zero, name + ":zero"), \
                {"axis": len(_dims(t)) - 1, "block_size": int(blocks.blockSize)}
        scale = np.asarray(q.scale, np.float32)
        zero = np.asarray(q.zeroPoint if q.zeroPoint is not None else np.zeros_like(scale), np.int64)
        zero = zero.astype(_NUMPY[t.type])
        per_axis = scale.size > 1
        if not per_axis:
            scale, zero = scale.reshape(()), zero.reshape(())
        return self.init(scale, name + ":scale"), self.init(zero, name + ":zero"), \
            ({"axis": int(q.quantizedDimension)} if per_axis else {})

    def float(self, i: int) -> str:
        """The float value of tensor `i`: a constant or a computed tensor, dequantized where held in integers."""
        if i in self.floats:
            return self.floats[i]
        t = self.sub.tensors[i]
        if i in self.constants:
            held = self.init(self.constant(i), self.name(i))
        elif _scaled(t):
            held = self.name(i)
        else:
            raise StageError(EMULATE, COMPONENT, f"{self.name(i)} is read before any op makes it")
        if _scaled(t):
            scale, zero, where = self.params(i)
            self.floats[i] = self.node("DequantizeLinear", [held, scale, zero], self.name(i) + ":f", **where)
        elif t.type == 1:  # float16 weights: widened exactly
            self.floats[i] = self.node("Cast", [held], self.name(i) + ":f", to=1)
        else:
            self.floats[i] = held
        return self.floats[i]

    def quantize(self, i: int, value: str) -> None:
        """Tensor `i` made from a float `value`: quantized with its own parameters where it is held in integers."""
        t = self.sub.tensors[i]
        if _scaled(t):
            scale, zero, where = self.params(i)
            self.node("QuantizeLinear", [value, scale, zero], self.name(i), **where)
        else:
            self.floats[i] = value

    # -- ops ------------------------------------------------------------------------------------------------------

    def op_name(self, op: Any) -> str:
        code = self.model.operatorCodes[op.opcodeIndex]
        return self.codes.get(max(code.builtinCode, code.deprecatedBuiltinCode), str(code.builtinCode))

    def op(self, op: Any) -> None:
        name = self.op_name(op)
        how = _OPS.get(name)
        if how is None:
            raise StageError(EMULATE, COMPONENT, f"no emulation of TFLite's {name} (op {self.at})")
        ins = [int(i) for i in op.inputs]
        outs = [int(i) for i in op.outputs]
        y = how(self, op, ins, outs)
        at = TABLE_INPUT.get(name, 1 if name in WEIGHTED_OPS else None)
        if at is not None and len(ins) > at and ins[at] in self.floats:  # a constant, or a DEQUANTIZE of one
            raw = self.sub.tensors[outs[0]].name
            self.weights[raw.decode() if isinstance(raw, bytes) else str(raw)] = [name, self.floats[ins[at]]]
        if y is None:  # the op wrote its own outputs
            return
        opts = op.builtinOptions
        act = getattr(opts, "fusedActivationFunction", 0) if opts is not None else 0
        if act:
            kind, bounds = _ACTIVATION[act]
            if bounds is None:
                y = self.node(kind, [y])
            else:
                lo, hi = (self.init(np.float32(b), "bound") for b in bounds)
                y = self.node("Clip", [y, lo, hi])
        self.quantize(outs[0], y)

    def shape(self, i: int) -> list[int]:
        return _dims(self.sub.tensors[i])

    def on_xnnpack(self) -> bool:
        """Whether XNNPACK runs the op being read."""
        return self.xnnpack is None or self.at in self.xnnpack


def _nchw(r: _Reader, x: str) -> str:
    return r.node("Transpose", [x], perm=[0, 3, 1, 2])


def _nhwc(r: _Reader, x: str) -> str:
    return r.node("Transpose", [x], perm=[0, 2, 3, 1])


def _pads(r: _Reader, padding: int, size: list[int], kernel: list[int], stride: list[int],
          dilation: list[int]) -> list[int]:
    """ONNX pads for TFLite's SAME (0) or VALID (1) over the spatial dims: SAME pads the lesser half before."""
    if padding != 0:
        return [0] * (2 * len(size))
    before, after = [], []
    for n, k, s, d in zip(size, kernel, stride, dilation):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return before + after


def _conv(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    o = op.builtinOptions
    w = r.float(ins[1])  # OHWI
    kh, kw = r.shape(ins[1])[1:3]
    depthwise = r.shape(ins[1])[0] == 1 and hasattr(o, "depthMultiplier")
    stride, dilation = [o.strideH, o.strideW], [o.dilationHFactor, o.dilationWFactor]
    size = r.shape(ins[0])[1:3]
    channels = r.shape(ins[0])[3]
    weight = r.node("Transpose", [w], perm=[3, 0, 1, 2] if depthwise else [0, 3, 1, 2])
    groups = channels if depthwise else channels // r.shape(ins[1])[3]  # CONV_2D groups: input channels / weight's
    x = r.float(ins[0])
    if _hybrid(r, ins):  # one range per batch item; per pixel where XNNPACK runs a 1x1 conv as a matrix product
        pointwise = not depthwise and [kh, kw] == [1, 1] and stride == [1, 1] and groups == 1
        on = r.on_xnnpack()
        x = _at_run_time(r, x, [3] if pointwise and on else [1, 2, 3], "xnnpack" if on else "tflite-asymmetric")
    args = [_nchw(r, x), weight]
    if len(ins) > 2 and ins[2] >= 0:
        args.append(r.float(ins[2]))
    y = r.node("Conv", args, strides=stride, dilations=dilation, group=groups,
               pads=_pads(r, o.padding, size, [kh, kw], stride, dilation))
    return _nhwc(r, y)


def _pool(kind: str) -> Callable[[_Reader, Any, list[int], list[int]], str]:
    def pool(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
        o = op.builtinOptions
        stride, kernel = [o.strideH, o.strideW], [o.filterHeight, o.filterWidth]
        pads = _pads(r, o.padding, r.shape(ins[0])[1:3], kernel, stride, [1, 1])
        extra = {"count_include_pad": 0} if kind == "AveragePool" else {}
        return _nhwc(r, r.node(kind, [_nchw(r, r.float(ins[0]))], kernel_shape=kernel, strides=stride, pads=pads,
                               **extra))
    return pool


def _hybrid(r: _Reader, ins: list[int]) -> bool:
    """Whether an op takes a float input and integer weights as they are (no DEQUANTIZE between): a dynamic-range
    kernel, which quantizes its input at run time."""
    return not _scaled(r.sub.tensors[ins[0]]) and ins[1] in r.constants and _scaled(r.sub.tensors[ins[1]])


def _at_run_time(r: _Reader, x: str, axes: list[int], rule: str) -> str:
    """A float input quantized to int8 at run time by the kernel that runs the op, one range per slice over `axes`
    (the emulation's RunTimeQuantize, onnxtools/emulate.py, in the kernel's own arithmetic: `rule`); -> its
    dequantized value, which the integer kernel computes with exactly."""
    from fpdiff.onnxtools.emulate import RUN_TIME_DOMAIN
    return r.node("RunTimeQuantize", [x], domain=RUN_TIME_DOMAIN, axes=axes, rule=rule)


def _fully_connected(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    w = r.float(ins[1])  # [units, depth]
    depth = r.shape(ins[1])[1]
    x = r.node("Reshape", [r.float(ins[0]), r.init(np.array([-1, depth], np.int64), "shape")])
    if _hybrid(r, ins):  # one range per row; TFLite's own kernel symmetric unless the op asks otherwise
        asymmetric = bool(getattr(op.builtinOptions, "asymmetricQuantizeInputs", False))
        x = _at_run_time(r, x, [1], "xnnpack" if r.on_xnnpack() else
                         "tflite-asymmetric" if asymmetric else "tflite-symmetric")
    y = r.node("MatMul", [x, r.node("Transpose", [w], perm=[1, 0])])
    if len(ins) > 2 and ins[2] >= 0:
        y = r.node("Add", [y, r.float(ins[2])])
    return r.node("Reshape", [y, r.init(np.array(r.shape(outs[0]), np.int64), "shape")])


def _onnx(kind: str) -> Callable[[_Reader, Any, list[int], list[int]], str]:
    """An op of the same name in ONNX on the op's inputs as they are (unary or binary, broadcasting as TFLite)."""
    def same(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
        return r.node(kind, [r.float(i) for i in ins])
    return same


def _squared_difference(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    d = r.node("Sub", [r.float(ins[0]), r.float(ins[1])])
    return r.node("Mul", [d, d])


def _rsqrt(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Reciprocal", [r.node("Sqrt", [r.float(ins[0])])])


def _to_shape(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    """RESHAPE, SQUEEZE, EXPAND_DIMS: the output tensor's own (static) shape."""
    return r.node("Reshape", [r.float(ins[0]), r.init(np.array(r.shape(outs[0]), np.int64), "shape")])


def _transpose(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Transpose", [r.float(ins[0])], perm=[int(p) for p in r.constant(ins[1])])


def _concatenation(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Concat", [r.float(i) for i in ins], axis=int(op.builtinOptions.axis))


def _softmax(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    beta = float(op.builtinOptions.beta) if op.builtinOptions is not None else 1.0
    x = r.float(ins[0])
    if beta != 1.0:
        x = r.node("Mul", [x, r.init(np.float32(beta), "beta")])
    return r.node("Softmax", [x], axis=-1)


def _pad(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    pads = np.asarray(r.constant(ins[1]), np.int64)
    args = [r.float(ins[0]), r.init(np.concatenate([pads[:, 0], pads[:, 1]]), "pads")]
    if len(ins) > 2 and ins[2] >= 0:
        args.append(r.float(ins[2]))
    return r.node("Pad", args)


def _clip(lo: float, hi: float) -> Callable[[_Reader, Any, list[int], list[int]], str]:
    def clip(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
        return r.node("Clip", [r.float(ins[0]), r.init(np.float32(lo), "lo"), r.init(np.float32(hi), "hi")])
    return clip


def _gelu(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    approximate = bool(getattr(op.builtinOptions, "approximate", False))
    return r.node("Gelu", [r.float(ins[0])], approximate="tanh" if approximate else "none")


def _leaky_relu(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("LeakyRelu", [r.float(ins[0])], alpha=float(op.builtinOptions.alpha))


def _batch_matmul(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    o = op.builtinOptions
    if _hybrid(r, ins):
        raise StageError(EMULATE, COMPONENT, "no emulation of TFLite's dynamic-range BATCH_MATMUL (op "
                         f"{r.at}: its run-time quantization of the input is not read)")
    a, b = r.float(ins[0]), r.float(ins[1])

    def last_two(x: str, rank: int) -> str:
        return r.node("Transpose", [x], perm=[*range(rank - 2), rank - 1, rank - 2])
    if o is not None and o.adjX:
        a = last_two(a, len(r.shape(ins[0])))
    if o is not None and o.adjY:
        b = last_two(b, len(r.shape(ins[1])))
    return r.node("MatMul", [a, b])


def _slice(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    begin = np.asarray(r.constant(ins[1]), np.int64)
    size = np.asarray(r.constant(ins[2]), np.int64)
    end = np.where(size < 0, np.iinfo(np.int64).max, begin + size)
    return r.node("Slice", [r.float(ins[0]), r.init(begin, "starts"), r.init(end, "ends")])


def _broadcast_to(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Expand", [r.float(ins[0]), r.init(np.asarray(r.constant(ins[1]), np.int64), "shape")])


def _embedding_lookup(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Gather", [r.float(ins[1]), r.float(ins[0])], axis=0)


def _gather(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    axis = int(op.builtinOptions.axis) if op.builtinOptions is not None else 0
    return r.node("Gather", [r.float(ins[0]), r.float(ins[1])], axis=axis)


def _cast(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Cast", [r.float(ins[0])], to=r.onnx_type(r.sub.tensors[outs[0]]))


def _reduce(kind: str) -> Callable[[_Reader, Any, list[int], list[int]], str]:
    def reduce(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
        axes = r.init(np.asarray(r.constant(ins[1]), np.int64).reshape(-1), "axes")
        keep = int(bool(op.builtinOptions.keepDims)) if op.builtinOptions is not None else 0
        return r.node(kind, [r.float(ins[0]), axes], keepdims=keep)
    return reduce


def _strided_slice(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    o = op.builtinOptions
    if o is not None and (o.ellipsisMask or o.newAxisMask or getattr(o, "offset", False)):
        raise StageError(EMULATE, COMPONENT, "no emulation of TFLite's STRIDED_SLICE with an ellipsis, new axis or "
                         "offset mask")
    begin, end, step = (np.asarray(r.constant(i), np.int64).copy() for i in ins[1:4])
    big = np.iinfo(np.int64).max
    for d in range(len(begin)):
        if o is not None and o.beginMask >> d & 1:
            begin[d] = 0 if step[d] > 0 else big
        if o is not None and o.endMask >> d & 1:
            end[d] = big if step[d] > 0 else -big
        if o is not None and o.shrinkAxisMask >> d & 1:
            end[d] = begin[d] + 1 if begin[d] != -1 else big
    axes = r.init(np.arange(len(begin), dtype=np.int64), "axes")
    y = r.node("Slice", [r.float(ins[0]), r.init(begin, "starts"), r.init(end, "ends"), axes, r.init(step, "steps")])
    return r.node("Reshape", [y, r.init(np.array(r.shape(outs[0]), np.int64), "shape")])


def _split(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> None:
    axis = int(np.asarray(r.constant(ins[0])).reshape(()))
    x = r.float(ins[1])
    sizes = r.init(np.array([r.shape(o)[axis] for o in outs], np.int64), "split")
    names = [f"Split:{r._n}:{k}" for k in range(len(outs))]
    import onnx
    r.nodes.append(onnx.helper.make_node("Split", [x, sizes], names, axis=axis))
    for o, n in zip(outs, names):
        r.quantize(o, n)


def _pack(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    axis = int(op.builtinOptions.axis)
    where = r.init(np.array([axis], np.int64), "axes")
    return r.node("Concat", [r.node("Unsqueeze", [r.float(i), where]) for i in ins], axis=axis)


def _gather_nd(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("GatherND", [r.float(ins[0]), r.node("Cast", [r.float(ins[1])], to=7)])


def _not_equal(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Not", [r.node("Equal", [r.float(ins[0]), r.float(ins[1])])])


def _cumsum(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    o = op.builtinOptions
    axis = r.init(np.asarray(r.constant(ins[1]), np.int64).reshape(()), "axis")
    return r.node("CumSum", [r.float(ins[0]), axis], exclusive=int(bool(o and o.exclusive)),
                  reverse=int(bool(o and o.reverse)))


def _tile(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Tile", [r.float(ins[0]), r.init(np.asarray(r.constant(ins[1]), np.int64), "repeats")])


def _square(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    x = r.float(ins[0])
    return r.node("Mul", [x, x])


def _shape(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.node("Cast", [r.node("Shape", [r.float(ins[0])])], to=r.onnx_type(r.sub.tensors[outs[0]]))


def _quantize(r: _Reader, op: Any, ins: list[int], outs: list[int]) -> str:
    return r.float(ins[0])  # float to integers, or integers requantized: the output's own quantizer follows


# the ops with weights: what a dynamic-range or weight-only file quantizes (a dynamic-range kernel computes them in
# integers from a float input and integer weights)
# ops that read a table a quantizer may store in integers (an embedding), by the input that holds it
TABLE_INPUT = {"GATHER": 0, "EMBEDDING_LOOKUP": 1}
# the graph's metadata key under which write() records its weighted ops (_Reader.weights, as JSON)
WEIGHTS_KEY = TFLITE_WEIGHTS
WEIGHTED_OPS = frozenset({"FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "BATCH_MATMUL", "TRANSPOSE_CONV"})
_OPS: dict[str, Callable[[_Reader, Any, list[int], list[int]], str | None]] = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "FULLY_CONNECTED": _fully_connected,
    "AVERAGE_POOL_2D": _pool("AveragePool"), "MAX_POOL_2D": _pool("MaxPool"),
    "ADD": _onnx("Add"), "SUB": _onnx("Sub"), "MUL": _onnx("Mul"), "DIV": _onnx("Div"),
    "MAXIMUM": _onnx("Max"), "MINIMUM": _onnx("Min"), "POW": _onnx("Pow"),
    "SQUARED_DIFFERENCE": _squared_difference, "RSQRT": _rsqrt, "SQRT": _onnx("Sqrt"), "EXP": _onnx("Exp"),
    "LOG": _onnx("Log"), "ABS": _onnx("Abs"), "NEG": _onnx("Neg"), "LOGISTIC": _onnx("Sigmoid"),
    "TANH": _onnx("Tanh"), "RELU": _onnx("Relu"), "RELU6": _clip(0.0, 6.0), "RELU_N1_TO_1": _clip(-1.0, 1.0),
    "HARD_SWISH": _onnx("HardSwish"), "GELU": _gelu, "LEAKY_RELU": _leaky_relu,
    "RESHAPE": _to_shape, "SQUEEZE": _to_shape, "EXPAND_DIMS": _to_shape, "TRANSPOSE": _transpose,
    "CONCATENATION": _concatenation, "MEAN": _reduce("ReduceMean"), "SOFTMAX": _softmax, "PAD": _pad, "PADV2": _pad,
    "BATCH_MATMUL": _batch_matmul, "BROADCAST_TO": _broadcast_to, "EMBEDDING_LOOKUP": _embedding_lookup,
    "GATHER": _gather, "CAST": _cast, "SELECT": _onnx("Where"), "SELECT_V2": _onnx("Where"),
    "LESS": _onnx("Less"), "LESS_EQUAL": _onnx("LessOrEqual"), "GREATER": _onnx("Greater"),
    "GREATER_EQUAL": _onnx("GreaterOrEqual"), "EQUAL": _onnx("Equal"),
    "LOGICAL_AND": _onnx("And"), "LOGICAL_OR": _onnx("Or"), "LOGICAL_NOT": _onnx("Not"),
    "SUM": _reduce("ReduceSum"), "REDUCE_MAX": _reduce("ReduceMax"), "REDUCE_MIN": _reduce("ReduceMin"),
    "SIN": _onnx("Sin"), "COS": _onnx("Cos"), "STRIDED_SLICE": _strided_slice, "SPLIT": _split, "PACK": _pack,
    "GATHER_ND": _gather_nd, "NOT_EQUAL": _not_equal, "CUMSUM": _cumsum, "TILE": _tile, "SQUARE": _square,
    "SHAPE": _shape, "FLOOR": _onnx("Floor"), "CEIL": _onnx("Ceil"), "ERF": _onnx("Erf"),
    "SLICE": _slice, "QUANTIZE": _quantize, "DEQUANTIZE": _quantize, "SIGN": _onnx("Sign"),
}
