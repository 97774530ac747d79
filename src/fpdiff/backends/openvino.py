"""OpenVINO's CPU plugin: the precision is a hint the plugin may override, so the cell reports what it really ran."""
from __future__ import annotations

from collections import Counter

from fpdiff.backends import mixed_dtype, too_wide
from fpdiff.backends.base import ONNX, TORCH, Backend, Prepared, Repro
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding
from fpdiff.core.errors import COMPILE, IMPORT, TORCH_EXPORT, Unsupported, stage

# INFERENCE_PRECISION_HINT values by fpdiff precision. The CPU plugin has no f64 inference precision, and no
# autocast: its bf16/f16 hints are its own mixed precision (it keeps what it judges sensitive in f32).
HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
OV_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64"}
# Runtime layers that move or reshape values without arithmetic, and the graph's edges: left out of the count of
# what the plugin computed in, as DATA_MOVEMENT is for ONNX graphs.
MOVES = {"Input", "Output", "Const", "Reorder", "Reshape", "Squeeze", "Unsqueeze", "ShapeOf", "Split", "Concatenation",
         "Transpose", "Gather", "Broadcast", "StridedSlice", "Convert", "Tile", "Pad", "DepthToSpace", "SpaceToDepth",
         "ScatterUpdate", "Range", "Select"}


def executed_dtypes(compiled) -> Counter:
    """Arithmetic layers of the compiled model by the precision the plugin ran them in (its runtime model)."""
    counts: Counter = Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "layerType" not in info or info["layerType"].astype(str) in MOVES:
            continue
        dtype = OV_DTYPES.get(info["runtimePrecision"].astype(str)) if "runtimePrecision" in info else None
        if dtype:
            counts[dtype] += 1
    return counts


class OpenVinoBackend(Backend):
    name = "openvino"
    kinds = frozenset({TORCH, ONNX})
    independent = True  # its own ONNX frontend and CPU plugin kernels

    requires = ("openvino",)
    install_hint = "pip install openvino"

    def prepare_task(self, task) -> Prepared:
        import openvino as ov
        p = task.precision
        if p.autocast is not None:
            raise Unsupported(f"OpenVINO has no autocast; its {p.name.removeprefix('amp-')} inference precision "
                              f"hint is its own mixed precision (run --precisions {p.name.removeprefix('amp-')})",
                              dtype=p.name)
        hint = HINTS.get(p.name)
        if hint is None:
            raise Unsupported(f"OpenVINO's CPU plugin has no {p.name} inference precision (f32, bf16, f16 only)",
                              dtype=p.name)
        if not task.device.startswith("cpu"):
            raise Unsupported(f"fpdiff runs OpenVINO on its CPU plugin; {task.device} is not one", dtype=p.name)
        with stage(IMPORT, "openvino.convert_model"):
            model = ov.convert_model(self._fp32_model(task))
            if task.variant.static is None:  # the converter leaves dims dynamic: pin the static cell's shapes
                model.reshape({port: ov.PartialShape(list(t.shape)) for port, t in zip(model.inputs, task.inputs())})
        core = ov.Core()
        with stage(COMPILE, "openvino CPU plugin"):
            compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": hint})
        used = str(compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())
        counts = executed_dtypes(compiled)
        want = task.requested_dtype
        info = {"op_dtypes": dict(counts), "inference_precision": used, "inference_precision_hint": hint,
                "openvino": ov.__version__.split("-")[0]}
        notes = []
        if OV_DTYPES.get(used) != want:
            notes.append(Finding("dtype-changed", f"OpenVINO was asked for {hint} and runs {used}: its CPU plugin "
                                 f"replaces an inference precision this processor lacks native arithmetic for",
                                 remedy=f"read this cell as {OV_DTYPES.get(used, used)}; for {want} numerics run on "
                                 "a CPU with native support (AVX512-FP16/AMX-FP16) or OpenVINO's GPU plugin"))
        elif too_wide(counts, want):
            notes.append(Finding("dtype-changed", f"OpenVINO ran {counts[want]} of {sum(counts.values())} arithmetic "
                                 f"layers in {want}; the rest in {', '.join(k for k in counts if k != want)}",
                                 remedy=f"judge this cell as mostly wider than {want}"))
        request = compiled.create_infer_request()
        segment = task.source.ref.kind == "program"  # cut at the precision: inputs go in as they are

        def run(*inputs):
            request.infer([_as_ov(t, segment) for t in inputs])
            return [_from_ov(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]

        return Prepared(run, mixed_dtype(dict(counts), want), notes, info)

    @staticmethod
    def _fp32_model(task):
        """What the plugin converts: the fp32 model (the precision is the hint's job); a segment as cut."""
        if task.source.ref.kind == "program":
            return task.source.fixed_program
        if task.is_torch:
            with stage(TORCH_EXPORT, "torch.export"):
                return task.source.program(prec.get("fp32"), task.variant)
        return task.source_onnx()[1]  # the model's own graph, or its opset conversion after that failed here

    def repro(self, r: Repro) -> str | None:
        """The segment as OpenVINO IR (segment.xml/.bin), so the script needs openvino and numpy alone."""
        import openvino as ov
        source = str(r.out / "segment.onnx") if r.onnx_segment else r.program
        ov.save_model(ov.convert_model(source), str(r.out / "segment.xml"), compress_to_fp16=False)
        r.meta["inference_precision_hint"] = HINTS.get(r.precision)
        return """import openvino as ov
model = ov.Core().read_model(str(here / "segment.xml"))
compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": meta["inference_precision_hint"]})
print("OpenVINO ran at", compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())
def feed(x, dtype, port):
    if dtype == "bfloat16":  # numpy has no bfloat16: the same bits as OpenVINO's bf16
        b = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
        return ov.Tensor(b, list(x.shape), ov.Type.bf16)
    return x.astype(dtype) if x.dtype.kind == "f" else x
request = compiled.create_infer_request()
request.infer([feed(x, d, p) for x, d, p in zip(xs, meta["input_dtypes"], compiled.inputs)])
def host(t):  # a bf16 output arrives as float16-typed bits: widen the bits themselves
    a = np.asarray(t.data)
    return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32) if t.element_type == ov.Type.bf16 else a
outs = [host(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]
"""


def _as_ov(t, keep_dtype: bool):
    """A torch input for the plugin: float inputs (already rounded to the cell's precision) as float32, which the
    fp32 model takes; a segment's in its own dtype (bfloat16 as OpenVINO's bf16 over the same bits)."""
    import openvino as ov
    import torch
    t = t.detach().cpu()
    if not t.is_floating_point():
        return t.numpy()
    if not keep_dtype:
        return t.float().numpy()
    if t.dtype == torch.bfloat16:
        return ov.Tensor(t.view(torch.int16).numpy().view("uint16").copy(), list(t.shape), ov.Type.bf16)
    return t.numpy()


def _from_ov(t):
    """An output tensor as torch: bf16 arrives from OpenVINO's numpy view typed float16; its bits are bf16's."""
    import numpy as np
    import openvino as ov
    import torch
    a = np.array(t.data, copy=True)
    if t.element_type == ov.Type.bf16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)
