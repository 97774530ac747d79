"""OpenVINO's CPU plugin: the precision is a hint the plugin may override, so the cell reports what it really ran."""
from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.backends.base import ONNX, TORCH, Backend, Prepared, Repro, Task, nodes_left_float
from fpdiff.backends.base import reading_back as read_back_on_first_run
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding
from fpdiff.core.dtypes import mixed_dtype, too_wide
from fpdiff.core.errors import COMPILE, IMPORT, TORCH_EXPORT, Unsupported, UsageError, stage
from fpdiff.core.support import Support

# INFERENCE_PRECISION_HINT values by fpdiff precision. The CPU plugin has no f64 inference precision, and no
# autocast: its bf16/f16 hints are its own mixed precision (it keeps what it judges sensitive in f32).
HINTS: dict[str | None, str] = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}  # a whole-model dtype: its hint
OV_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64"}
# The instruction sets the CPU plugin computes each narrow format with; without them it replaces the hint
NATIVE_ISA = {"bfloat16": "AVX512-BF16 or AMX-BF16", "float16": "AVX512-FP16 or AMX-FP16"}
# Runtime layers that move or reshape values without arithmetic, and the graph's edges: left out of the count of
# what the plugin computed in, as DATA_MOVEMENT is for ONNX graphs.
MOVES = {"Input", "Output", "Const", "Reorder", "Reshape", "Squeeze", "Unsqueeze", "ShapeOf", "Split", "Concatenation",
         "Transpose", "Gather", "Broadcast", "StridedSlice", "Convert", "Tile", "Pad", "DepthToSpace", "SpaceToDepth",
         "ScatterUpdate", "Range", "Select"}


# The same in the graph handed to the plugin (opset names), where a graph made only of these (or of integer and
# boolean arithmetic) has nothing to compute in a float precision: the Convert subgraphs the plugin wraps around it
# for an f16 hint are not the model's arithmetic.
GRAPH_MOVES = {"Parameter", "Result", "Constant", "Reshape", "Squeeze", "Unsqueeze", "ShapeOf", "Split",
               "VariadicSplit", "Concat", "Transpose", "Gather", "GatherND", "GatherElements", "Broadcast",
               "StridedSlice", "Slice", "Convert", "ConvertLike", "Tile", "Pad", "DepthToSpace", "SpaceToDepth",
               "ScatterUpdate", "ScatterNDUpdate", "ScatterElementsUpdate", "Range", "Select", "Identity"}
# The compile of the pinned shapes, tried first in a child process: OpenVINO 2026.4's CPU plugin dies with SIGSEGV in
# a graph transformation of its f32 pipeline on static shapes of small residual MLPs (two blocks of Linear -> ReLU or
# GELU -> Linear + residual, batch 4 to 8; tests/specs/ov_residual_mlp.py, bench/upstream/openvino_static_mlp.py),
# which would take the worker with it. A crash there is the plugin's on shapes fpdiff pinned; the cell then runs the
# converter's own (dynamic) dims, as `ov.convert_model` hands them to a user, and says so.
_PROBE = ("import sys, openvino as ov; core = ov.Core(); "
          "core.compile_model(core.read_model(sys.argv[1]), 'CPU', {'INFERENCE_PRECISION_HINT': sys.argv[2]})")
PROBE_TIMEOUT = 600.0  # seconds: a mid-size compile fits; the cell's own timeout still bounds the worker
# A finding of its own: the plugin ran another inference precision than the hint asked for (the cell's op count
# then makes it dtype-changed too, by the one rule of core/dtypes.py)
HINT_REPLACED = "hint-replaced"
# the CPU plugin quantizing a weight-only model's activations at run time (its dynamic quantization)
RUNTIME_QUANTIZED = "runtime-quantizes-activations"


def executed_dtypes(compiled: Any) -> Counter[str]:
    """Arithmetic layers of the compiled model by the precision the plugin ran them in (its runtime model)."""
    counts: Counter[str] = Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "layerType" not in info or info["layerType"].astype(str) in MOVES:
            continue
        dtype = OV_DTYPES.get(info["runtimePrecision"].astype(str)) if "runtimePrecision" in info else None
        if dtype:
            counts[dtype] += 1
    return counts


# The runtime layers that carry a model's arithmetic weight (what quantization is for), and the runtime precisions
# that are integers
COMPUTE_LAYERS = frozenset({"Convolution", "FullyConnected", "MatMul", "GroupConvolution", "Deconvolution",
                            "GroupDeconvolution", "ScaledDotProductAttention"})
INTEGER_PRECISIONS = frozenset({"i8", "u8", "i4", "u4"})


def runtime_integers(compiled: Any) -> dict[str, Any]:
    """The compute layers of the compiled model that ran in integers (by layer type) and those left in float."""
    ints: Counter[str] = Counter()
    left: list[str] = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        kind = info["layerType"].astype(str) if "layerType" in info else ""
        if kind not in COMPUTE_LAYERS:
            continue
        precision = info["runtimePrecision"].astype(str) if "runtimePrecision" in info else ""
        if precision in INTEGER_PRECISIONS:
            ints[kind] += 1
        else:
            left.append(f"{kind} {op.get_friendly_name()} ({precision or '?'})")
    return {"integer_ops": dict(ints), "float_ops": len(left), "left_float": left[:32]}


def _activations_quantized(compiled: Any, record: dict[str, Any], weight_only: bool) -> Iterator[Finding]:
    """A finding when the plugin quantizes activations at run time: its CPU plugin feeds the FullyConnected layers
    whose weights are compressed (4 or 8 bits) activations it quantizes to int8 itself, one range per group of
    DYNAMIC_QUANTIZATION_GROUP_SIZE values, which the file does not say; the emulation computes them in float."""
    group = int(compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE") or 0)
    compressed = sum(n for k, n in record["integer_ops"].items() if k == "FullyConnected")
    if group and compressed and weight_only:
        yield Finding(RUNTIME_QUANTIZED, f"OpenVINO's CPU plugin quantizes the activations of {compressed} "
                      f"FullyConnected layers with compressed weights to int8 at run time, in groups of {group} "
                      "values (its DYNAMIC_QUANTIZATION_GROUP_SIZE default), where the file keeps them float: the "
                      "emulation computes them in float, so this cell's departure includes that rounding; "
                      "DYNAMIC_QUANTIZATION_GROUP_SIZE=0 turns it off")


# Runtime layers whose bodies the plugin's runtime model does not list (their precision is "u8", the condition's)
CONTROL_FLOW = frozenset({"If", "Loop", "TensorIterator"})


def control_flow(compiled: Any) -> list[str]:
    """The control-flow layer types of the compiled model (their bodies' arithmetic is not counted)."""
    found = [op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ordered_ops()
             if "layerType" in op.get_rt_info()]
    return sorted({t for t in found if t in CONTROL_FLOW})


def float_arithmetic(model: Any) -> int:
    """Ops of the graph handed to the plugin that compute a float value (not moves, not integer or boolean)."""
    return sum(1 for op in model.get_ordered_ops() if op.get_type_name() not in GRAPH_MOVES
               and any(op.get_output_element_type(i).is_real() for i in range(op.get_output_size())))


def _converted(ov: Any, source: Any) -> Any:
    """ov.convert_model, with the converter's own "no translation for this op" said as the refusal it is: its
    report lists each op it could not convert and why (an input it does not support), which is what the model
    contains that OpenVINO cannot take, not a failure of the converter."""
    try:
        return ov.convert_model(source)
    except Exception as e:
        text = " ".join(str(e).split())
        if "wasn't fully converted" not in text:
            raise
        reasons = unconverted(text)
        ops = list(reasons)
        said = "; ".join(f"{op}: {why}" for op, why in reasons.items() if why)
        raise Unsupported(f"OpenVINO's converter has no translation for {', '.join(ops) or 'an op'}"
                          f"{' (' + said + ')' if said else ''}", op=ops[0] if ops else None) from e


def reading_back(run: Callable[..., list[Any]], graph: Path, record: dict[str, Any],
                 into: dict[str, Any]) -> Callable[..., list[Any]]:
    """run(*inputs) for a quantized cell whose first call also reads back every activation quantizer (base.py
    reading_back) from the graph with them marked, converted and compiled the cell's way."""
    return read_back_on_first_run(run, graph, record, into, _run_marked)


def _run_marked(model: Any, inputs: tuple) -> list[Any]:
    """The marked graph converted, compiled at the f32 hint and run on `inputs`: all its outputs, as numpy."""
    import tempfile

    import onnx
    import openvino as ov
    with tempfile.TemporaryDirectory(prefix="fpdiff-ov-marked-") as tmp:
        path = Path(tmp) / "marked.onnx"
        onnx.save(model, str(path))
        with stage(COMPILE, "openvino CPU plugin"):
            compiled = ov.Core().compile_model(_converted(ov, str(path)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    request.infer([_as_ov(t, False) for t in inputs])
    return [np.array(request.get_output_tensor(i).data, copy=True) for i in range(len(compiled.outputs))]


def unconverted(text: str) -> dict[str, str]:
    """Each op the converter's report lists as not converted, with its own reason (the last "failed with KIND:
    reason" of its section; older releases wrote "OpConversionFailure: [...] reason."), or "" where it gives none
    ("No conversion rule found for operations: a, b")."""
    out: dict[str, str] = {}
    for op, body in re.findall(r"-- (\S+) with a message: (.*?)(?= -- \S+ with a message:| Summary:|$)", text):
        why = re.findall(r"failed with \w+: (.*?)(?= While validating|$)", body) or re.findall(
            r"OpConversionFailure: (\[[^\]]*\][^.]*\.)", body) or re.findall(r"[:] ([^:]+?)\s*$", body)
        out.setdefault(op, why[-1].strip() if why else "")
    for names in re.findall(r"No conversion rule found for operations: (.*?)(?= --| Summary:|$)", text):
        for op in names.split(","):
            out.setdefault(op.strip(), "")
    return out


def ignored(task: Task) -> tuple[str, ...]:
    """The nodes the user's flags leave float in a cell NNCF quantizes: nncf.IgnoredScope's names."""
    return nodes_left_float(task.flags, "openvino", "ignored_scope", task.precision)


class OpenVinoBackend(Backend):
    name = "openvino"
    kinds = frozenset({TORCH, ONNX})
    independent = True  # its own ONNX frontend and CPU plugin kernels
    requires = ("openvino",)
    extra = "openvino"
    takes_flags = True  # ignored_scope=NODE,NODE: a quantized cell's nodes NNCF leaves float

    def prepare_task(self, task: Task) -> Prepared:
        import openvino as ov
        ignored(task)  # refused here in one line
        p = task.precision
        if p.autocast is not None:
            raise Unsupported(f"OpenVINO has no autocast; its {p.name.removeprefix('amp-')} inference precision "
                              f"hint is its own mixed precision (run --precisions {p.name.removeprefix('amp-')})",
                              dtype=p.name)
        hint = HINTS.get(p.cast_dtype)
        if hint is None:
            raise Unsupported(f"OpenVINO's CPU plugin has no {p.name} inference precision (f32, bf16, f16 only)",
                              dtype=p.name)
        if not task.device.startswith("cpu"):
            raise Unsupported(f"fpdiff runs OpenVINO on its CPU plugin; {task.device} is not one", dtype=p.name)
        with stage(IMPORT, "openvino.convert_model"):
            converted = _converted(ov, self._fp32_model(task))
            model = converted
            if task.variant.static is None and not all(i.get_partial_shape().is_static for i in converted.inputs):
                model = converted.clone()  # the converter leaves dims dynamic: pin the static cell's shapes
                model.reshape({port: ov.PartialShape(list(t.shape)) for port, t in zip(model.inputs, task.inputs())})
        notes: list[Finding] = []
        info: dict[str, Any] = {"openvino": ov.__version__.split("-")[0]}
        if model is not converted:
            with stage(COMPILE, "openvino CPU plugin"):
                crash = _static_compile_crash(task, model, hint)
            if crash:
                model = converted
                info["openvino_shapes"] = "as converted (dynamic dims): the pinned static shapes crash the plugin"
                notes.append(Finding("compile-crash", f"OpenVINO's CPU plugin {crash} compiling this model with its "
                                     f"static shapes at {hint} (in a child process); this cell ran the dims "
                                     "ov.convert_model leaves dynamic",
                                     remedy="deploy with dynamic dims on this OpenVINO version, or report the "
                                     "crash upstream (a script that compiles the saved IR at these shapes)"))
        core = ov.Core()
        with stage(COMPILE, "openvino CPU plugin"):
            compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": hint})
        used = str(compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())
        counts = executed_dtypes(compiled)
        want = task.requested_dtype
        info.update({"inference_precision": used, "inference_precision_hint": hint})
        support = plugin_support(core, model, compiled, hint, used)
        if not sum(counts.values()) or not float_arithmetic(model):  # nothing could run in another dtype: what the
            info["runtime_layers"] = dict(counts)  # plugin counts is its own conversions, not the model's arithmetic
            return Prepared(self._runner(compiled, task), want, notes, info, support=support)
        hidden = control_flow(compiled)
        if hidden:  # the runtime model shows an If or a loop as one layer and hides its bodies' precisions
            info["runtime_layers_incomplete"] = (f"{', '.join(hidden)} layers hide their bodies' precisions: the "
                                                 "count is of the layers outside them")
        ran = OV_DTYPES.get(used, used)
        if ran != want:
            notes.append(Finding(HINT_REPLACED, f"OpenVINO was asked for {hint} and runs {used}: its CPU plugin "
                                 "replaces an inference precision this processor lacks native arithmetic for"))
        remedy = (f"read this cell as {ran}; for {want} numerics run on a CPU with native support "
                  f"({NATIVE_ISA.get(want, 'its instructions')}) or OpenVINO's GPU plugin") if ran != want else None
        return Prepared(self._runner(compiled, task), computed_dtype(counts, want, used), notes, info,
                        op_dtypes=dict(counts), dtype_remedy=remedy, support=support)

    def prepare_quantized(self, task: Task) -> Prepared:
        """The model quantized as OpenVINO's users quantize it: by NNCF, its own quantizer (int8, fp8, 4-bit
        weights), or the user's own QDQ file; int8-dynamic, which NNCF does not make, is ONNX Runtime's dynamic graph.
        Compiled by the CPU plugin at the f32 hint, so what is not quantized stays f32 on every processor; the
        plugin's low-precision transformations decide what runs in integers, read from its runtime model (each
        compute layer's runtime precision)."""
        import openvino as ov

        from fpdiff.onnxtools import nncf_graph, quantize
        if not task.device.startswith("cpu"):
            raise Unsupported(f"fpdiff runs OpenVINO on its CPU plugin; {task.device} is not one", dtype="int8")
        scheme = task.precision.name
        given = Path(task.given) if task.given else None
        by_nncf = not given and scheme in nncf_graph.NNCF_QUANTIZERS
        scope = ignored(task)
        if scope and not by_nncf:
            raise UsageError(f"--backend-flag openvino=ignored_scope=... is NNCF's; OpenVINO's {scheme} cell is not "
                             "quantized by NNCF")
        graph = given or (nncf_graph.nncf_graph(task, scope) if by_nncf else quantize.qdq_graph(task))
        with stage(IMPORT, "openvino.convert_model"):
            model = _converted(ov, str(graph))
        with stage(COMPILE, "openvino CPU plugin"):
            compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        made = f"the file itself ({given.name})" if given else \
            nncf_graph.tool(scheme, scope) if by_nncf else quantize.tool(scheme, graph)
        component = f"the file {graph.name}" if given else nncf_graph.NNCF if by_nncf else quantize.QUANTIZE
        record = {"graph": str(graph), "tool": made, "component": component, **runtime_integers(compiled),
                  **quantize.float_graph(task, pre=not by_nncf)}
        info = {"quantized_by": made, "run_by": f"OpenVINO CPU plugin {ov.__version__.split('-')[0]} (f32 hint)"}
        if by_nncf:
            info["scheme"] = nncf_graph.SCHEMES[scheme]
        weight_only = task.precision.scheme is not None and task.precision.scheme.activations == "float"
        values: dict[str, Any] = {}
        run = reading_back(self._runner(compiled, task), graph, record, values)
        return Prepared(run, notes=list(_activations_quantized(compiled, record, weight_only)), info=info,
                        quantized=record, read_back=values)

    @staticmethod
    def _runner(compiled: Any, task: Task) -> Callable[..., list[Any]]:
        request = compiled.create_infer_request()
        segment = task.is_program  # at its precision already: inputs go in as they are

        def run(*inputs: Any) -> list[Any]:
            request.infer([_as_ov(t, segment) for t in inputs])
            return [_from_ov(request.get_output_tensor(i)) for i in range(len(compiled.outputs))]
        return run

    def handed(self, task: Task) -> tuple[Any, list[Any], list[str] | None]:
        """The fp32 model (the precision is a hint) with the float inputs, rounded at the cell's precision, fed as
        float32 (_as_ov); a program as written."""
        import onnx
        inputs = list(task.inputs())
        model = self._fp32_model(task)
        model = onnx.load(str(model)) if isinstance(model, Path) else model
        if task.is_program:
            return model, inputs, None
        return model, inputs, ["float32" if t.is_floating_point() else str(t.dtype).removeprefix("torch.")
                               for t in inputs]

    @staticmethod
    def _fp32_model(task: Task) -> Any:
        """What the plugin converts: the fp32 model (the precision is the hint's job); a program as written (a
        `.pt2` or an `.onnx` graph). Of an ONNX model, the graph every other backend runs at fp32 (the source cast to
        float32: a float64 model is not handed over as float64, which the plugin would narrow its own way); at
        fp16/bf16 too, since the hint, not the graph, sets the plugin's precision (an f16 graph under the f32 hint
        is computed in f32)."""
        if task.is_program:
            if not task.is_torch:
                return task.onnx_file()
            with stage(TORCH_EXPORT, "torch.export"):
                return task.program()
        fp32 = task.at(prec.FP32)
        if task.is_torch:
            with stage(TORCH_EXPORT, "torch.export"):
                return fp32.program()
        return fp32.onnx_file()

    def repro(self, r: Repro) -> str | None:
        """The segment as OpenVINO IR (segment.xml/.bin), so the script needs openvino and numpy alone. When the
        conversion itself fails, that is what the script shows: it converts the ONNX graph (or the exported program,
        with torch) itself."""
        import openvino as ov
        source = str(r.out / "segment.onnx") if r.onnx_segment else r.program
        r.meta["inference_precision_hint"] = HINTS.get(r.precision.cast_dtype)
        try:
            ov.save_model(ov.convert_model(source), str(r.out / "segment.xml"), compress_to_fp16=False)
            load = 'model = ov.Core().read_model(str(here / "segment.xml"))\n'
        except Exception:
            load = ('model = ov.convert_model(str(here / "segment.onnx"))\n' if r.onnx_segment else
                    'import torch\nmodel = ov.convert_model(torch.export.load(str(here / "segment.pt2")))\n')
        return "import openvino as ov\n" + load + """hint = meta["inference_precision_hint"]
compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": hint})
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


# Support in the CPU plugin's own words: the precision each op of the graph it was handed ran in (its runtime model's
# layers name the ops they came from), against the hint; query_model for an op no layer names.
SUPPORT_OPS = 64  # op types recorded per graph: a one-op case needs one; a whole model must not flood the report
_NOT_OPS = {"Parameter", "Result", "Constant", "Convert"}  # the graph's edges and the casts around it


def layer_precisions(compiled: Any) -> dict[str, set[str]]:
    """Each original op's friendly name -> the float precisions of the runtime layers made from it."""
    ran: dict[str, set[str]] = {}
    for layer in compiled.get_runtime_model().get_ordered_ops():
        rt = layer.get_rt_info()
        if "originalLayersNames" not in rt or "runtimePrecision" not in rt:
            continue
        precision = rt["runtimePrecision"].astype(str)
        if precision not in OV_DTYPES:  # integer and boolean layers say nothing of a float precision
            continue
        for name in rt["originalLayersNames"].astype(str).split(","):
            ran.setdefault(name, set()).add(precision)
    return ran


def plugin_support(core: Any, model: Any, compiled: Any, hint: str, used: str) -> Support:
    """Per float op type of the graph handed to the plugin: the precisions its layers ran in under the hint, and the
    state that makes (native: only the hint's; other-dtype: any other, the hint replaced or the op kept wider);
    an op no layer names is asked of query_model. At most SUPPORT_OPS op types."""
    import openvino as ov
    ran = layer_precisions(compiled)
    by_type: dict[str, set[str]] = {}
    unnamed: dict[str, str] = {}  # friendly name -> op type, of ops no runtime layer names
    for op in model.get_ordered_ops():
        kind, name = op.get_type_name(), op.get_friendly_name()
        if kind in _NOT_OPS or not any(op.get_output_element_type(i).is_real() for i in range(op.get_output_size())):
            continue
        if kind not in by_type and len(by_type) >= SUPPORT_OPS:
            continue
        by_type.setdefault(kind, set()).update(ran.get(name, ()))
        if name not in ran:
            unnamed[name] = kind
    queried = core.query_model(model, "CPU") if unnamed else {}
    refused = {kind for name, kind in unnamed.items() if name not in queried}
    ops = {kind: _op_support(kind, precisions, hint, used, kind in refused) for kind, precisions in by_type.items()}
    return Support(f"openvino {ov.__version__.split('-')[0]} CPU", ops, details={"hint": hint, "ran_hint": used})


def _op_support(kind: str, precisions: set[str], hint: str, used: str, refused: bool) -> dict[str, Any]:
    """One op type's record under the hint: what its layers ran in, and the state."""
    entry: dict[str, Any] = {"asked": OV_DTYPES[hint], "ran": sorted(OV_DTYPES[p] for p in precisions)}
    replaced = f" (the {hint} hint ran as {used})" if used != hint else ""
    if refused:
        entry.update(state="not-implemented", said=f"query_model: the CPU plugin does not support {kind}")
    elif not precisions:  # folded or fused away with no layer naming it: the plugin said nothing of it
        entry["said"] = f"no runtime layer of the CPU plugin names {kind} (folded or fused)"
    elif precisions == {hint}:
        entry.update(state="native", said=f"the CPU plugin ran {kind} in {hint}")
    else:
        entry.update(state="other-dtype", said=f"the CPU plugin ran {kind} in {', '.join(sorted(precisions))} under "
                     f"the {hint} hint{replaced}")
    return entry


def computed_dtype(counts: Counter[str], want: str, used: str) -> str | None:
    """What the cell computed in. OpenVINO's bf16/f16 hint is its own mixed precision: it keeps layers it judges
    sensitive in f32 (58-96% of layers ran in bf16 on transformers decoders), so a run whose layers pass the
    dtype-changed share rule (backends.MOSTLY) in the requested dtype is a run in that dtype, its mix in
    info.op_dtypes; below that share, or with the hint replaced, the mix itself is what it computed in."""
    if OV_DTYPES.get(used) == want and not too_wide(counts, want):
        return want
    return mixed_dtype(dict(counts), want)


def _static_compile_crash(task: Task, model: Any, hint: str) -> str | None:
    """How the plugin died compiling `model` (pinned static shapes) in a child process, or None when it did not
    die (a plain failure is raised again by the real compile). Cached per model, precision and shapes."""
    import tempfile

    import openvino as ov

    def probe(out: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="fpdiff-ov-") as tmp:
            xml = f"{tmp}/model.xml"
            ov.save_model(model, xml, compress_to_fp16=False)
            try:
                r = subprocess.run([sys.executable, "-c", _PROBE, xml, hint], capture_output=True,
                                   timeout=PROBE_TIMEOUT)
                code = r.returncode
            except subprocess.TimeoutExpired:
                code = 0  # not a crash: the real compile then runs under the cell's own timeout
        out.write_text(_signal_text(code) if code < 0 else "")

    path, _ = task.cache.get_or_build(*task.key("openvino-static-compile", ov.__version__, hint), suffix=".txt",
                                      build=probe)
    return path.read_text() or None


def _signal_text(code: int) -> str:
    import signal
    try:
        return f"died with {signal.Signals(-code).name}"
    except ValueError:
        return f"died with signal {-code}"


def _as_ov(t: Any, keep_dtype: bool) -> Any:
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


def _from_ov(t: Any) -> Any:
    """An output tensor as torch: bf16 arrives from OpenVINO's numpy view typed float16; its bits are bf16's."""
    import numpy as np
    import openvino as ov
    import torch
    a = np.array(t.data, copy=True)
    if t.element_type == ov.Type.bf16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)
