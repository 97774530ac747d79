"""ONNX graph facts every analysis reads the same way: its real inputs, the ops that only move values, the float
type of each value, and the float64 reference run (the judge of ONNX models)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from fpdiff.core.errors import MESSAGE_CHARS, ReferenceFailed, Unsupported

# Ops whose output holds their first input's values, moved or regrouped (no arithmetic): they take that input's
# dtype in a mixed graph, and a kept op's fp32 output must stay fp32 through them.
PASS_THROUGH = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Gather", "Slice",
                          "Concat", "Split", "Expand", "Cast", "CastLike", "GatherElements", "GatherND", "Tile", "Pad",
                          "Dropout"})
# Every op that does no arithmetic: the pass-through ones, the ones that make shapes or constants, and the ones that
# select or scatter values. Their dtype says nothing about where rounding happens (so they are not counted when
# judging what dtype a backend computed in), and keeping one in fp32 fixes nothing (so a plan never keeps one).
DATA_MOVEMENT = PASS_THROUGH | {"Shape", "Size", "Constant", "ConstantOfShape", "Range", "Where", "ScatterElements",
                                "ScatterND"}


def graph_inputs(model) -> list[str]:
    """The inputs a caller feeds: graph inputs that are not initializers (old opsets list weights as inputs)."""
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def value_types(model) -> dict[str, int]:
    """Element type of every value (shape inference where it can; a graph with ops unknown to onnx, such as ONNX
    Runtime's contrib ops, keeps the types already written into it)."""
    import onnx
    try:
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # unknown ops: the value_info the producer wrote is what there is
        pass
    g = model.graph
    types = {vi.name: vi.type.tensor_type.elem_type for vi in list(g.value_info) + list(g.input) + list(g.output)}
    types.update({t.name: t.data_type for t in g.initializer})
    return types


def ort_session(model, device: str = "cpu", optimized_to: Path | None = None):
    """An ONNX Runtime session as every part of fpdiff opens one: its log quiet (a refused kernel is reported, not
    printed), the CPU provider (CUDA's on a cuda device, refused when this onnxruntime has none), and the graph it
    optimized written to `optimized_to` (read to count the dtypes it really ran)."""
    import onnxruntime as ort
    providers = ["CPUExecutionProvider"]
    if device.startswith("cuda"):
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise Unsupported("this onnxruntime has no CUDAExecutionProvider")
        providers = ["CUDAExecutionProvider"]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if optimized_to is not None:
        opts.optimized_model_filepath = str(optimized_to)
    source = str(model) if isinstance(model, (str, Path)) else model.SerializeToString()
    return ort.InferenceSession(source, opts, providers=providers)


def float64_values(model, feeds: dict, intermediate: bool = True) -> dict:
    """Every value (or the outputs) of the graph computed in float64 by the ONNX reference evaluator, with kernels
    that keep float64 where its own would drop to float32 (backends/onnxref.py). The evaluator's refusal (no kernel
    for an op, an op version or a type: NotImplementedError, RuntimeTypeError) is a usage error: fpdiff has no
    judge for this model, said with the node. Any other failure of a kernel (the evaluator's or fpdiff's) is an
    EvaluatorNodeError naming the node (onnxtools/evaluator.py)."""
    from onnx.reference.op_run import RuntimeTypeError

    from fpdiff.onnxtools.dtypes import ONNX_TYPE
    from fpdiff.onnxtools.evaluator import EvaluatorNodeError, evaluator
    from fpdiff.onnxtools.mixed import cast_model
    m64 = cast_model(model, ONNX_TYPE["float64"])
    def wide(v):  # a float tensor, or a sequence of them, in float64
        return [wide(x) for x in v] if isinstance(v, list) else (v.astype(np.float64) if v.dtype.kind == "f" else v)
    feeds64 = {k: wide(v) for k, v in feeds.items()}
    refusals = (NotImplementedError, RuntimeTypeError)
    try:
        out = evaluator(m64, new_ops=float64_ops()).run(None, feeds64, intermediate=intermediate)
    except EvaluatorNodeError as e:
        if not isinstance(e.__cause__, refusals):
            raise
        raise ReferenceFailed(f"the float64 reference evaluator cannot run this model: {e}") from e
    except refusals as e:
        why = " ".join(str(e).split())[:MESSAGE_CHARS]
        raise ReferenceFailed(f"the float64 reference evaluator cannot run this model: {type(e).__name__}: "
                              f"{why}") from e
    return out


def float64_ops() -> list:
    """Kernels that compute in the input's dtype: the evaluator's own Erf is float32 (np.vectorize with
    otypes "f"), and its Gelu expands into float32 constants, which would make the float64 judge a float32 one.
    Its LogSoftmax is log(softmax(x)): a probability that underflows to 0 gives -inf where the answer is finite
    (log_softmax([22400, 22100, 32000]) is [-9600, -9900, 0]); here it is x - max - log(sum(exp(x - max))).
    Its LRN sums its window over the batch axis instead of the channels (only channel 0 is normalized); here it
    follows the ONNX definition. Its ceil_mode AveragePool gives 0 for a window wider than the input; here that is
    torch's (ONNX Runtime's) average. With them, refkernels.py's: the evaluator's own numbers for Conv,
    ConvTranspose, MaxPool and float16 MatMul without its Python loops, and GlobalMaxPool and grouped ConvTranspose
    computed right."""
    import math

    import numpy as np
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_log_softmax import LogSoftmax as NaiveLogSoftmax

    from fpdiff.onnxtools.refkernels import fast_ops

    erf = np.vectorize(math.erf, otypes=[np.float64])

    class Erf(OpRun):
        op_domain = ""

        def _run(self, x):
            return (erf(x).astype(x.dtype),)

    class Gelu(OpRun):
        op_domain = ""

        def _run(self, x, approximate="none"):
            x64 = x.astype(np.float64)
            if approximate == "tanh":
                y = 0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64**3)))
            else:
                y = 0.5 * x64 * (1 + erf(x64 / math.sqrt(2)))
            return (y.astype(x.dtype),)

    class LogSoftmax(NaiveLogSoftmax):  # the evaluator's own axis handling, the stable formula
        def _run(self, x, axis=None):
            if x.size == 0:
                return (x,)
            axis = axis or self.axis
            shifted = x - x.max(axis=axis, keepdims=True)
            return ((shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(x.dtype),)

    class LRN(OpRun):  # onnx/onnx#7805 (fixed by #8331, after 1.23): its loop runs over the batch axis, so every
        op_domain = ""  # channel past the first is divided by bias**beta alone; here the window is the channels

        def _run(self, x, alpha=1e-4, beta=0.75, bias=1.0, size=1):
            lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
            sq = np.square(x)
            edge = np.cumsum(np.pad(sq, [(0, 0), (1, 0)] + [(0, 0)] * (x.ndim - 2)), axis=1)
            c = np.arange(x.shape[1])
            window = edge.take(np.minimum(c + hi + 1, x.shape[1]), axis=1) - edge.take(np.maximum(c - lo, 0), axis=1)
            return ((x / (bias + (alpha / size) * window) ** beta).astype(x.dtype),)
    from onnx.reference.ops.op_average_pool import AveragePool_19 as StockAveragePool

    class AveragePool(StockAveragePool):  # with ceil_mode, a window that runs past the input (a pool of 320 over a
        def _run(self, x, auto_pad=None, ceil_mode=0, count_include_pad=0, dilations=None, kernel_shape=None,
                 pads=None, strides=None):  # 2x2 map, as transformers' EfficientNet pooler exports) comes out 0
            nd = x.ndim - 2
            pads = list(pads or [0] * 2 * nd)
            simple = (auto_pad in (None, "NOTSET", b"NOTSET") and not any(d != 1 for d in (dilations or []))
                      and pads[:nd] == pads[nd:] and 1 <= nd <= 3 and x.dtype == np.float64
                      and all(p <= k // 2 for p, k in zip(pads, kernel_shape)))
            stock = super()._run(x, auto_pad=auto_pad, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                                 dilations=dilations, kernel_shape=kernel_shape, pads=pads, strides=strides)
            if not (ceil_mode and simple):
                return stock
            import torch  # torch's windows are ONNX Runtime's: clipped to the input, divided by what they cover
            pool = getattr(torch.nn.functional, f"avg_pool{nd}d")
            y = pool(torch.from_numpy(x), list(kernel_shape), list(strides or kernel_shape), pads[:nd],
                     ceil_mode=True, count_include_pad=bool(count_include_pad)).numpy()
            return (y,) if y.shape == stock[0].shape else stock  # where their windows differ, the evaluator's
    return [Erf, Gelu, LogSoftmax, LRN, AveragePool, *fast_ops()]
