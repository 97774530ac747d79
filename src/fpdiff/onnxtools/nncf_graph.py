"""A model quantized by NNCF, OpenVINO's own quantizer, the way its users run it on an ONNX model: `nncf.quantize`
for static int8 and fp8, `nncf.compress_weights` for 4-bit weights. NNCF writes QDQ ONNX (and MatMulNBits for 4-bit
weights), which OpenVINO converts and runs and which fpdiff emulates like any QDQ graph; cached by model, format and
calibration."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fpdiff.core import precision as prec
from fpdiff.core.errors import QUANTIZE, StageError, Unsupported, stage
from fpdiff.core.quiet import quieted
from fpdiff.core.task import Task
from fpdiff.onnxtools.quantize import known_nodes

# How each format is asked of NNCF (what the report says quantized the cell). int8 and fp8: nncf.quantize with its
# defaults (the PERFORMANCE preset: symmetric int8 weights per channel, int8 activations per tensor, symmetric, or
# unsigned after a ReLU; its own range estimators on the calibration inputs; fast bias correction, which rewrites
# biases). 4-bit: weights only, int4 symmetric in groups of 32 on every MatMul and Gemm, none kept at 8 bits (its
# default keeps the first and last layers at int8 asymmetric per channel, whose rank-3 scale tensors OpenVINO's ONNX
# frontend refuses), which is the format docs/quant.md defines. Embeddings stay float: NNCF 3.4 compresses an
# embedding's Gather into a MatMulNBits whose input is the token ids, which no runtime takes.
NNCF_QUANTIZERS = {
    "int8": "nncf.quantize (preset PERFORMANCE, its defaults: fast bias correction)",
    "int4-weight": "nncf.compress_weights(mode=INT4_SYM, group_size=32, ratio=1.0, all_layers=True, "
                   "backup_mode=NONE, ignored_scope=IgnoredScope(types=['Gather']))",
    "fp8": "nncf.quantize(mode=FP8_E4M3), its defaults otherwise",
}
SCHEMES = {
    "int8": "weights int8 per-channel symmetric, activations int8 per-tensor symmetric (uint8 after a ReLU), "
            "rounding half to even, calibration NNCF's range estimators on the calibration inputs, biases corrected",
    "int4-weight": "weights int4 symmetric in groups of 32 on every MatMul and Gemm (embeddings float), activations "
                   "float, calibration none (weight-only)",
    "fp8": "weights and activations float8 e4m3 per tensor, calibration NNCF's range estimators on the calibration "
           "inputs",
}
NNCF = "nncf"
# The oldest opset NNCF takes an ONNX model at (its own check): QuantizeLinear's, and per-channel scales' for 4-bit
OLDEST_OPSET = {"int8": 10, "fp8": 10, "int4-weight": 13}


def nncf_graph(task: Task, ignored: tuple[str, ...] = ()) -> Path:
    """The cell's fp32 ONNX graph quantized by NNCF in the task's format, calibrated on task.calibration(), cached;
    `ignored`: nodes of that graph NNCF leaves float (its IgnoredScope's names)."""
    scheme = task.precision.name
    if scheme not in NNCF_QUANTIZERS:
        raise Unsupported(f"NNCF quantizes {', '.join(NNCF_QUANTIZERS)} ahead of time; {scheme} is not one of them",
                          dtype=scheme)
    fp32 = task.at(prec.FP32)
    path = fp32.onnx_file()
    calibration = [tuple(t.numpy() for t in c) for c in task.calibration()]
    known_nodes(path, ignored, "ignored_scope", "the fp32 graph")
    parts = ("nncf-quantized", scheme, task.calibration_digest(), *(("ignored", *ignored) if ignored else ()))
    quantized, _ = fp32.cache.get_or_build(*fp32.key(*parts), suffix=".onnx",
                                           build=lambda out: _quantize(path, out, scheme, calibration, ignored))
    return quantized


def tool(scheme: str, ignored: tuple[str, ...] = ()) -> str:
    """What quantized a cell, as its report says it, with the nodes the user's ignored scope left float."""
    import nncf
    said = f"{NNCF} {nncf.__version__}: {NNCF_QUANTIZERS[scheme]}, weight transposes folded into constants first"
    if ignored:
        said += (f", IgnoredScope(names=) {len(ignored)} node{'s' * (len(ignored) != 1)} ({', '.join(ignored[:4])}"
                 f"{', ...' if len(ignored) > 4 else ''})")
    return said


def _quantize(fp32: Path, out: Path, scheme: str, calibration: list[tuple[Any, ...]],
              ignored: tuple[str, ...] = ()) -> None:
    """`fp32` quantized into `out` by NNCF, `ignored` left float; any failure in its code is charged to it."""
    import onnx
    try:
        import nncf
    except ImportError:
        raise StageError(QUANTIZE, NNCF, "NNCF, OpenVINO's quantizer, is not installed: pip install "
                         "'fpdiff[openvino]'") from None
    model = folded_transposes(onnx.load(str(fp32)))
    weights = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in weights]
    data = nncf.Dataset([dict(zip(names, c)) for c in calibration])
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < OLDEST_OPSET[scheme]:
        raise Unsupported(f"NNCF quantizes ONNX models from opset {OLDEST_OPSET[scheme]} in {scheme}; this model is "
                          f"opset {opset}", dtype=scheme)
    with stage(QUANTIZE, NNCF), quieted("nncf", stdout=True):  # its progress bars and bit-width tables
        if scheme == "int4-weight":
            made = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT4_SYM, group_size=32, ratio=1.0,
                                         all_layers=True, backup_mode=nncf.BackupMode.NONE,
                                         ignored_scope=nncf.IgnoredScope(names=list(ignored), types=["Gather"],
                                                                         validate=False))
        elif scheme == "fp8":
            made = nncf.quantize(model, data, mode=nncf.QuantizationMode.FP8_E4M3, subset_size=len(calibration),
                                 ignored_scope=nncf.IgnoredScope(names=list(ignored)))
        else:
            made = nncf.quantize(model, data, subset_size=len(calibration),
                                 ignored_scope=nncf.IgnoredScope(names=list(ignored)))
    dangling = _dangling(made)
    if dangling:
        raise StageError(QUANTIZE, NNCF, f"the graph NNCF made reads {len(dangling)} tensors nothing in it makes "
                         f"({', '.join(dangling[:3])}): it removed an initializer that other nodes share")
    onnx.save(made, str(out))


def _dangling(model: Any) -> list[str]:
    """Node inputs of the top graph that no graph input, initializer or node makes."""
    known = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer} | \
        {o for n in model.graph.node for o in n.output}
    return sorted({i for n in model.graph.node for i in n.input if i and i not in known})


def folded_transposes(model: Any) -> Any:
    """The graph with each Transpose of a float initializer replaced by the transposed initializer (exact), as
    torch.onnx's default optimizer writes a linear layer's weight: NNCF's weight compression looks for a MatMul's
    weight among the initializers by name, and fails on `MatMul(x, Transpose(W))`."""
    import onnx
    from onnx import numpy_helper
    inits = {t.name: t for t in model.graph.initializer}
    kept = []
    for n in model.graph.node:
        source = inits.get(n.input[0]) if n.op_type == "Transpose" and n.input else None
        if source is None or source.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
            kept.append(n)
            continue
        perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), None)
        model.graph.initializer.append(numpy_helper.from_array(
            numpy_helper.to_array(source).transpose(perm), n.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    return model
