"""A model quantized by ONNX Runtime's quantization tools (onnxruntime.quantization), the way their users run them:
the QDQ graph an ONNX backend is handed for a quantized cell (ONNX Runtime itself, and OpenVINO and IREE, which take
QDQ graphs), cached by model, format and calibration."""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.core import precision as prec
from fpdiff.core.errors import MESSAGE_CHARS, StageError, Unsupported, UsageError, stage
from fpdiff.core.errors import QUANTIZE as QUANTIZING
from fpdiff.core.quiet import quieted
from fpdiff.core.task import Task

# How each quantized format is asked of onnxruntime.quantization (what the report says quantized the cell): the
# settings its documentation gives for CPU inference (u8 activations, s8 weights per channel, QDQ), MinMax
# calibration for int8 and the Distribution method fp8 requires, 4-bit blocks of 32 symmetric.
QUANTIZERS = {
    "int8": "quant_pre_process, then quantize_static(QDQ, per_channel, activations QUInt8, weights QInt8, MinMax)",
    "int8-dynamic": "quant_pre_process, then quantize_dynamic(per_channel, weights QInt8)",
    "int4-weight": "quant_pre_process, then MatMulNBitsQuantizer(block_size=32, is_symmetric=True)",
    "fp8": "quant_pre_process, then quantize_static(QDQ, activations and weights QFLOAT8E4M3FN, Distribution, "
           "ActivationSymmetric)",
}
QUANTIZE = "onnxruntime.quantization"


def qdq_graph(task: Task, exclude: tuple[str, ...] = (), at8: tuple[str, ...] = ()) -> Path:
    """The cell's fp32 ONNX graph quantized in the task's format, calibrated on task.calibration(), cached;
    `exclude`: nodes of the pre-processed graph the quantizer leaves float (its nodes_to_exclude); `at8`: MatMul
    nodes an int4-weight cell quantizes at 8 bits instead."""
    fp32 = task.at(prec.FP32)
    scheme = task.precision.name
    calibration = [tuple(t.numpy() for t in c) for c in task.calibration()]
    pre = preprocessed(task)
    known_nodes(pre, exclude, "nodes_to_exclude", "the pre-processed float graph", dynamic=scheme == "int8-dynamic")
    known_nodes(pre, at8, "nodes_at_8_bits", "the pre-processed float graph")
    both = sorted(set(exclude) & set(at8))
    if both:
        raise UsageError(f"nodes_to_exclude and nodes_at_8_bits both name {', '.join(both[:3])}: a node is left "
                         "float or quantized at 8 bits, not both")
    # the recipe is in the key: a changed option is another quantized model
    parts = ("ort-quantized", scheme, QUANTIZERS[scheme], task.calibration_digest(),
             *(("exclude", *exclude) if exclude else ()), *(("at8", *at8) if at8 else ()))
    quantized, _ = fp32.cache.get_or_build(*fp32.key(*parts), suffix=".onnx", build=lambda out: quantize_graph(
        pre, out, scheme, calibration, exclude, at8))
    return quantized


def known_nodes(graph: Path, nodes: tuple[str, ...], option: str, what: str, dynamic: bool = False) -> None:
    """A quantizer's list of nodes to leave float, checked against the graph it quantizes: an unknown name is one
    line (a quantizer would skip it without a word). `dynamic`: onnxruntime's quantize_dynamic, which replaces each
    Gemm G by a MatMul named G_MatMul (and an Add) before it reads nodes_to_exclude, so G_MatMul is the name that
    leaves that layer float and G itself is skipped without a word."""
    if not nodes:
        return
    import onnx
    graph_nodes = onnx.load(str(graph), load_external_data=False).graph.node
    names = {n.name for n in graph_nodes}
    if dynamic:
        gemms = {n.name for n in graph_nodes if n.op_type == "Gemm"}
        named = [n for n in nodes if n in gemms]
        if named:
            raise UsageError(f"{option} names Gemm node{'s' * (len(named) != 1)} {', '.join(named[:3])}: "
                             "quantize_dynamic replaces each Gemm by a MatMul named after it before it reads "
                             f"{option}, so name {', '.join(g + '_MatMul' for g in named[:3])}")
        names |= {g + "_MatMul" for g in gemms}
    unknown = [n for n in nodes if n not in names]
    if unknown:
        raise UsageError(f"{option} names {len(unknown)} node{'s' * (len(unknown) != 1)} {what} does not have: "
                         f"{', '.join(unknown[:3])}")


def preprocessed(task: Task) -> Path:
    """The cell's fp32 graph after onnxruntime.quantization's own pre-processing, cached: the float graph its
    quantizer quantizes, with the tensors its optimizer made (a Gemm's reshapes) under the names the quantized graph
    keeps."""
    fp32 = task.at(prec.FP32)
    path = fp32.onnx_file()
    return fp32.cache.get_or_build(*fp32.key("ort-preprocessed"), suffix=".onnx",
                                   build=lambda out: _pre_process(path, out))[0]


def _pre_process(fp32: Path, out: Path) -> None:
    """quant_pre_process as its documentation has users run it before quantizing, its failures charged to it."""
    import tempfile

    import onnx
    from onnxruntime.quantization.shape_inference import quant_pre_process
    with tempfile.TemporaryDirectory(prefix="fpdiff-ort-pre-") as tmp:
        whole = Path(tmp) / "model.onnx"
        onnx.save(onnx.load(str(fp32)), str(whole))  # its weights inline: the quantizer copies files by name
        with stage(QUANTIZING, QUANTIZE), quieted():
            # symbolic shape inference refuses many exported graphs; ORT's own optimizer pass is the part that
            # folds the weight transposes the quantizer needs as constants
            quant_pre_process(str(whole), str(out), skip_symbolic_shape=True)


def float_graph(task: Task, pre: bool = True) -> dict[str, str]:
    """The float graph the cell's quantized graph was made from, for its record (`pre`: onnxruntime.quantization's
    pre-processed graph, else the fp32 graph itself): the quantized graph keeps its tensor names, so the float model's
    own value of each quantized tensor is read from it. None for the user's own file, whose names fpdiff did not
    choose."""
    if task.given:
        return {}
    return {"float_graph": str(preprocessed(task) if pre else task.at(prec.FP32).onnx_file())}


def tool(scheme: str, graph: Path | None = None, exclude: tuple[str, ...] = (), at8: tuple[str, ...] = ()) -> str:
    """What quantized a cell, as its report says it, with the nodes it left float where fpdiff asked it to
    (`graph`: the quantized graph) or the user did (`exclude`), and those the user had it quantize at 8 bits."""
    import onnxruntime
    said = f"{QUANTIZE} {onnxruntime.__version__}: {QUANTIZERS[scheme]}"
    for option, nodes in (("nodes_to_exclude", exclude), ("nodes_at_8_bits", at8)):
        if nodes:
            said += (f", {option}={len(nodes)} node{'s' * (len(nodes) != 1)} ({', '.join(nodes[:4])}"
                     f"{', ...' if len(nodes) > 4 else ''})")
    if at8:
        said += " then MatMulNBitsQuantizer(bits=8, block_size=32, is_symmetric=True) on those alone"
    left = left_float_nodes(graph)
    if left:
        said += (f", with the {len(left)} Softmax node{'s' * (len(left) != 1)} left float (nodes_to_exclude: "
                 f"{', '.join(left[:4])}{', ...' if len(left) > 4 else ''}), since it cannot quantize a Softmax to "
                 f"fp8 ({SOFTMAX_FINDING})")
    return said


FLOAT32_HALF = float(np.finfo(np.float32).max) / 2  # a magnitude past this doubles to inf in float32
SOFTMAX_FINDING, LEFT_FLOAT = "findings/quant-007", "fpdiff.left_float"  # the graph's record of nodes left float


def _note_left_float(out: Path, nodes: list[str]) -> None:
    """The quantized graph records the nodes left float and why, so a cached graph's cell says it too."""
    import onnx
    m = onnx.load(str(out))
    onnx.helper.set_model_props(m, {**{p.key: p.value for p in m.metadata_props}, LEFT_FLOAT: ", ".join(nodes)})
    onnx.save(m, str(out))


def left_float_nodes(graph: Path | None) -> list[str]:
    """The nodes quantize_graph left float in a quantized graph (its record), none for any other graph."""
    import onnx
    if graph is None:
        return []
    props = {p.key: p.value for p in onnx.load(str(graph), load_external_data=False).metadata_props}
    return [n for n in props.get(LEFT_FLOAT, "").split(", ") if n]


def fp8_failure(model: Any, e: Exception) -> str | None:
    """What makes onnxruntime.quantization's fp8 fail on this graph, where it is one of the known causes (its own
    message names none): a Softmax (findings/quant-007), a constant past half of float32's range, which the
    Distribution calibration's histogram of what it reaches cannot span (findings/quant-008), or a constant of one
    value, whose scale from its spread is 0 (findings/quant-010). None: another cause."""
    from onnx import numpy_helper
    text = str(e)
    if "'avg' and/or 'std' missing" in text:
        softmax = [n.name or n.output[0] for n in model.graph.node if n.op_type == "Softmax"]
        if softmax:
            return (f"AttributeError: Attributes 'avg' and/or 'std' missing: the quantizer fixes each Softmax output's "
                    f"range at [0, 1] ({len(softmax)} here, the first {softmax[0]}) without the spread its float8 "
                    "scale is computed from, so no graph with a Softmax quantizes to fp8 (findings/quant-007)")
    flat = re.search(r"Initializer '(.+?)(?:_quantized)?' has nan", text)
    if flat:
        said = flat.group(1)
        # the quantizer copies a constant two nodes share under its name and a number (conv1d_25 -> conv1d_252)
        same = [t for t in model.graph.initializer if said == t.name or (said.startswith(t.name) and
                                                                         said[len(t.name):].isdigit())]
        t = max(same, key=lambda t: len(t.name), default=None)
        held, name = (numpy_helper.to_array(t), t.name) if t is not None else (None, said)
        if held is not None and held.size and np.ptp(np.asarray(held, dtype=np.float64)) == 0:
            return (f"ValueError: Initializer '{said}_quantized' has nan: the quantizer computes a constant's float8 "
                    f"scale from its spread, and {name} holds one value ({float(held.flat[0]):g} everywhere, as a bias "
                    "still at its initial zeros does), so its scale is 0 and 0 / 0 is NaN (findings/quant-010)")
    if "Too many bins for data range" in text:
        huge = _huge_constants(model)
        if huge:
            name, v = huge[0]
            said = " ".join(text.split()).rstrip(".")
            return (f"ValueError: {said}: the fp8 calibration (Distribution, the only one it takes) "
                    f"histograms each tensor over +-its largest magnitude in float32, and {name} holds {v:.3g} "
                    f"(float32's lowest or highest: an additive attention mask), so a tensor it reaches spans more "
                    f"than float32 holds ({len(huge)} such constant{'s' * (len(huge) != 1)}; findings/quant-008)")
    return None


def _huge_constants(model: Any) -> list[tuple[str, float]]:
    """The float initializers and Constant nodes holding a magnitude past half of float32's range, with that value."""
    from onnx import numpy_helper

    from fpdiff.onnxtools.mixed import const_value, is_float_constant
    found = [(t.name, numpy_helper.to_array(t)) for t in model.graph.initializer]
    found += [(n.output[0], const_value(n)) for n in model.graph.node if is_float_constant(n)]
    out = []
    for name, v in found:
        f = np.asarray(v, dtype=np.float64).ravel() if np.asarray(v).dtype.kind == "f" else np.zeros(0)
        f = f[np.isfinite(f)]
        if f.size and np.abs(f).max() > FLOAT32_HALF:
            out.append((name, float(f[np.abs(f).argmax()])))
    return out


def quantize_graph(pre: Path, out: Path, scheme: str, calibration: list[tuple[Any, ...]],
                   exclude: tuple[str, ...] = (), at8: tuple[str, ...] = ()) -> None:
    """The pre-processed fp32 graph `pre` quantized into `out` by onnxruntime.quantization in the format named
    (QUANTIZERS), `exclude` left float (its nodes_to_exclude); any failure in its code is charged to it."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    model = onnx.load(str(pre), load_external_data=False)
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter([dict(zip(names, c)) for c in calibration])

        def get_next(self) -> dict | None:
            return next(self.feeds, None)

    with stage(QUANTIZING, QUANTIZE), quieted(), _runtime_errors_only():  # its advice, INFO and C++ warnings
        if scheme == "int8":
            quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax, nodes_to_exclude=list(exclude))
        elif scheme == "int8-dynamic":
            quantize_dynamic(str(pre), str(out), per_channel=True, weight_type=QuantType.QInt8,
                             nodes_to_exclude=list(exclude))
        elif scheme == "fp8":
            def fp8(more: list[str]) -> None:
                # ActivationSymmetric: e4m3 is symmetric (no zero point); off, the quantizer removes each Relu and
                # Clip as for uint8, whose zero point clamps, and the fp8 model computes without them (quant-011)
                quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ,
                                activation_type=QuantType.QFLOAT8E4M3FN, weight_type=QuantType.QFLOAT8E4M3FN,
                                calibrate_method=CalibrationMethod.Distribution,
                                nodes_to_exclude=[*exclude, *(e for e in more if e not in exclude)],
                                extra_options={"ActivationSymmetric": True})
            try:
                fp8([])
            except (AttributeError, ValueError) as e:
                why = fp8_failure(model, e)
                if why is None:
                    raise
                if SOFTMAX_FINDING not in why:
                    raise StageError(QUANTIZING, QUANTIZE, why) from e
                # what its users do: the Softmax nodes left float (nodes_to_exclude), the rest quantized as asked;
                # the cell says so (tool, from the graph's own record of it)
                softmax = [n.name for n in model.graph.node if n.op_type == "Softmax"]
                try:
                    fp8(softmax)
                except (AttributeError, ValueError) as again:
                    second = fp8_failure(model, again) or f"{type(again).__name__}: {' '.join(str(again).split())}"
                    raise StageError(QUANTIZING, QUANTIZE, f"with its {len(softmax)} Softmax nodes left float "
                                     f"({SOFTMAX_FINDING}), it fails again: {second}"[:MESSAGE_CHARS]) from again
                _note_left_float(out, softmax)
        elif scheme == "int4-weight":
            from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
            q = MatMulNBitsQuantizer(onnx.load(str(pre)), block_size=32, is_symmetric=True,
                                     nodes_to_exclude=[*exclude, *at8])
            q.process()
            made = q.model.model
            if at8:  # its second pass quantizes every MatMul it is not told to exclude: all but these
                others = [n.name for n in made.graph.node if n.name not in at8]
                q = MatMulNBitsQuantizer(made, bits=8, block_size=32, is_symmetric=True, nodes_to_exclude=others)
                q.process()
                made = q.model.model
            onnx.save(made, str(out))
        else:
            raise Unsupported(f"onnxruntime.quantization has no {scheme} path in fpdiff")
    asked = _required_inputs(onnx.load(str(out), load_external_data=False)) - set(names)
    if asked:
        raise StageError(QUANTIZING, QUANTIZE, f"the quantized graph asks for {len(asked)} inputs the model does "
                         f"not have ({', '.join(sorted(asked)[:4])}, ...): the quantizer dropped initializers "
                         "the graph also lists as inputs")


@contextlib.contextmanager
def _runtime_errors_only() -> Iterator[None]:
    """ONNX Runtime's own log at errors while its calibration sessions run: each warns on stderr of every
    initializer it removes, hundreds of lines a sweep that quantizes its cases; its default (warnings) after."""
    import warnings

    import onnxruntime as ort
    ort.set_default_logger_severity(3)
    try:
        with warnings.catch_warnings():  # numpy's on an infinite range: the judge names the scale it makes
            warnings.simplefilter("ignore", RuntimeWarning)
            yield
    finally:
        ort.set_default_logger_severity(2)


def _required_inputs(m: Any) -> set[str]:
    """The graph's inputs that no initializer feeds: what a run must be given."""
    return {i.name for i in m.graph.input} - {t.name for t in m.graph.initializer}
