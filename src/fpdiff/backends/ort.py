"""ONNX Runtime: CPU execution provider (CUDA EP where installed), on the exported or given ONNX graph."""
from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.backends import to_numpy as _to_numpy
from fpdiff.backends.base import (
    NUMPY_INPUTS,
    ONNX,
    TORCH,
    Artifact,
    Backend,
    Prepared,
    Repro,
    Task,
    TensorSpec,
    quantizer_nodes,
)
from fpdiff.backends.base import reading_back as read_back_on_first_run
from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.dtypes import mixed_dtype
from fpdiff.core.errors import LOAD, ONNX_EXPORT, StageError, Unsupported, UsageError, stage
from fpdiff.core.support import Support
from fpdiff.onnxtools.graph import DATA_MOVEMENT, ort_session, value_types
from fpdiff.onnxtools.marked import marked
from fpdiff.onnxtools.quantize import QUANTIZE, float_graph
from fpdiff.onnxtools.quantize import tool as quantizing_tool


def op_dtypes(model_path: Path) -> Counter:
    """Count arithmetic nodes of an (ORT-optimized) graph by the float type they compute in, the nodes inside If,
    Loop and Scan bodies included (the control-flow node itself computes nothing)."""
    import onnx
    m = onnx.load(str(model_path), load_external_data=False)  # types only
    types = value_types(m)
    inferred = _inferred(m)
    for g in _subgraphs(inferred.graph):
        types.update({vi.name: vi.type.tensor_type.elem_type for vi in [*g.value_info, *g.input, *g.output]})
        types.update({t.name: t.data_type for t in g.initializer})
    names: dict[int, str] = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16",
             onnx.TensorProto.BFLOAT16: "bfloat16", onnx.TensorProto.DOUBLE: "float64"}
    counts: Counter = Counter()
    for node in _all_nodes(m.graph):
        if node.op_type in DATA_MOVEMENT or any(a.type in (a.GRAPH, a.GRAPHS) for a in node.attribute):
            continue
        float_types = [names[types[n]] for n in node.input if types.get(n) in names]
        if float_types:
            counts[max(set(float_types), key=float_types.count)] += 1
    return counts


# How ONNX Runtime names the op it has no kernel for: "Failed to find kernel for AveragePool(1)", "Could not find
# an implementation for Add(6) node with name ''" (the op and its opset version; the wording differs by dtype).
_KERNEL_OP = re.compile(r"(?:kernel for|implementation for) (?P<op>[\w.]+)\((?P<version>\d+)\)")


# ONNX Runtime's FAIL status with its own words of refusal: an op it has never heard of ("ai.onnx.preview:
# FlexAttention(-1) is not a registered function/op") and an attribute value its kernel declares it does not support
# ("Batchwise recurrent operations (layout == 1) are not supported" in LSTM and GRU). Other FAILs are errors.
_REFUSED = re.compile(r"(?P<op>[\w.:]+\(-?\d+\)) is not a registered function/op|"
                      r"(?P<what>[A-Z][\w ]*\([^)]*\)) are not supported")


def open_session(model: Path | Any, device: str, optimized: Path | None = None) -> Any:
    """The session, with ONNX Runtime's NOT_IMPLEMENTED status (its kernel registry has no kernel for this op, op
    version and types) raised as its declared refusal, whatever the message's wording."""
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
    try:
        return ort_session(model, device, optimized_to=optimized)
    except OrtNotImplemented as e:
        m = _KERNEL_OP.search(str(e))
        op = f"{m['op']} (opset {m['version']})" if m else None
        fused = _fused_by_ort(model, m["op"], str(e)) if m else None  # a node ORT's optimizer made
        if fused is not None:
            raise Unsupported(f"{fused[0]}: {' '.join(str(e).split())}", op=fused[1]) from e
        made = _expanded_from(model, m["op"], device) if m else None  # an op of a function ORT expanded
        if made is not None:
            raise Unsupported(f"{made}: {' '.join(str(e).split())}", op=made.split(" ")[0]) from e
        raise Unsupported(" ".join(str(e).split()), op=op) from e
    except Exception as e:
        said = " ".join(str(e).split())
        refused = _REFUSED.search(said)
        expanded = _EXPANDED.search(said)
        if expanded and refused is None:
            op = _expanded_from(model, expanded["op"], device)
            if op is not None:
                raise Unsupported(f"{op}: {said}", op=op.split(" ")[0]) from e
        if refused is None:
            raise
        raise Unsupported(said, op=refused["op"]) from e


# ONNX Runtime's type error on a node it made itself (an empty node name): an op of the model with no kernel for the
# dtype was expanded as its ONNX function, and an op of that body refuses the type (bf16 Clip becomes Where).
_EXPANDED = re.compile(r"Type '(?P<type>[^']*)' of input parameter \([^)]*\) of operator \((?P<op>\w+)\) in node \(\)")


_NODE_NAME = re.compile(r"node with name '(?P<name>[^']*)'")


def _fused_by_ort(model: Path | Any, op: str, said: str) -> tuple[str, str] | None:
    """Where the node without a kernel is one ONNX Runtime's graph optimizer fused (a node the model does not hold,
    named after the fusion: MatMul and Add fused into a Gemm named '/MatMulAddFusion'), what it says and the model's
    ops it fused (as its name spells them); its function expansions leave the name empty (_expanded_from)."""
    import onnx
    found = _NODE_NAME.search(said)
    if found is None or not found["name"]:
        return None
    m = onnx.load(str(model)) if isinstance(model, (str, Path)) else model
    nodes = _all_nodes(m.graph)
    if found["name"] in {n.name for n in nodes}:
        return None
    maker = found["name"].rsplit("/", 1)[-1] or found["name"]
    if "Fusion" not in maker:  # ORT's fusions name their nodes after themselves; an inlined If branch renames the
        return None            # model's own node ('If_0_else_branch__Inline_0__/stft/Conv'): that op is the model's
    ops: list[tuple[int, int, str]] = []
    for t in sorted({n.op_type for n in nodes}, key=len, reverse=True):  # the longest names first: MatMul, not Mul
        i = maker.find(t)
        if i >= 0 and not any(i < e and s < i + len(t) for s, e, _ in ops):
            ops.append((i, i + len(t), t))
    fused = "+".join(t for _, _, t in sorted(ops)) or op
    return (f"{fused} fused into {op} by ONNX Runtime's graph optimizer ({maker}), with no kernel here for its "
            "type", fused)


def _expanded_from(model: Path | Any, op: str, device: str) -> str | None:
    """Which op of the model ONNX Runtime expanded into `op`, when `op` is not in the model: the model's ops that
    have an ONNX function body and no kernel here for the graph's float type (one name, or several joined)."""
    import onnx
    m = onnx.load(str(model)) if isinstance(model, (str, Path)) else model
    opsets = {_domain(o.domain): o.version for o in m.opset_import}
    present = {n.op_type for n in _all_nodes(m.graph)}
    if op in present:
        return None
    types = value_types(m)
    found = []
    for node in _all_nodes(m.graph):
        schema, fi = _schema(node, opsets), _float_input(node, types)
        if schema is None or fi is None or not (schema.has_function or schema.has_context_dependent_function):
            continue
        version = schema.since_version
        if fi[1] not in kernel_types(provider(device), node.domain, node.op_type, version, _type_param(schema, fi[0])):
            found.append(node.op_type)
    names = list(dict.fromkeys(found))
    return (f"{' or '.join(names)} (no kernel here for its type: ONNX Runtime expands it as its ONNX "
            f"function, whose {op} has no kernel for it)") if names else None


def _inferred(m: Any) -> Any:
    """The model with onnx's shape inference (subgraph value types included), or as it is where inference fails."""
    import onnx
    try:
        return onnx.shape_inference.infer_shapes(m)
    except Exception:  # ops onnx does not know (ORT's fused contrib ops): the types written into the graph
        return m


def _subgraphs(g: Any) -> list:
    """Every subgraph below `g` (If branches, Loop and Scan bodies), nested ones included."""
    out = []
    for n in g.node:
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                out += [sub, *_subgraphs(sub)]
    return out


def _all_nodes(g: Any) -> list:
    """The graph's nodes and its subgraphs' nodes."""
    out = []
    for n in g.node:
        out.append(n)
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                out += _all_nodes(sub)
    return out


def exported_graph_checked(path: Path, info: dict[str, Any]) -> None:
    """A torch export ONNX Runtime would refuse for its types (bfloat16 where the opset has none) is the
    exporter's invalid graph, not a kernel ONNX Runtime lacks: full type check before loading it."""
    import onnx

    from fpdiff.onnxtools.mixed import type_error
    why = type_error(onnx.load(str(path)))
    if why is not None:
        exporter = info.get("onnx_exporter", "")
        raise StageError(ONNX_EXPORT, f"torch.onnx {exporter}".strip(),
                         f"the exported graph is not valid ONNX (full type check): {why}")


def cell_graph(task: Task) -> tuple[Path, dict[str, Any]]:
    """The ONNX graph this backend runs for the cell (a torch model's export, checked; an ONNX source cast; an
    `.onnx` program as written), and what the exporter recorded making it (onnxtools/export.py)."""
    path = task.onnx_file()
    info: dict[str, Any] = {}
    if task.is_torch:
        from fpdiff.onnxtools.export import export_info
        info.update(export_info(path))  # which torch->ONNX exporter made the graph this cell ran
        exported_graph_checked(path, info)  # fpdiff's own cast graphs are checked where they are made (task)
    return path, info


def _scratch() -> Path:
    """A folder of this cell's own for the graph ONNX Runtime writes as it optimizes."""
    import tempfile
    return Path(tempfile.mkdtemp(prefix="fpdiff-ort-"))


def _remover(folder: Path) -> Callable[[], None]:
    import shutil
    return lambda: shutil.rmtree(folder, ignore_errors=True)


def prepared(run: Callable[..., list[Any]], info: dict[str, Any]) -> Prepared:
    """A Prepared with the exporter's record: shown in info, its float64 departure also the typed field check
    reads."""
    departure = info.get("onnx_export_departure")
    return Prepared(run, info=info, export_departure=float(departure) if departure is not None else None)


def feeder(session: Any, outputs: list[str] | None = None) -> Callable[..., list[Any]]:
    """run(*inputs) for a session: the inputs fed by the session's input names, the named outputs (all: None)
    returned in that order."""
    names = [i.name for i in session.get_inputs()]
    wanted = [o for o in session.get_outputs() if outputs is None or o.name in outputs]
    bf16_out = any(o.type == "tensor(bfloat16)" for o in wanted)

    def run(*inputs: Any) -> list[Any]:
        feed = {n: _to_numpy(t) for n, t in zip(names, inputs)}
        if not bf16_out and not any(_bf16(a) for a in feed.values()):
            return session.run(outputs, feed)
        values = {n: _ort_value(a) for n, a in feed.items()}
        return [_host(v) for v in session.run_with_ort_values(outputs, values)]
    return run


def _bf16(a: Any) -> bool:
    return getattr(a, "dtype", None) is not None and str(a.dtype) == "bfloat16"


def _ort_value(a: Any) -> Any:
    """An input as ONNX Runtime's own value: its numpy binding takes no bfloat16 array (ml_dtypes or other), so a
    bfloat16 input goes in as its bits, typed bfloat16."""
    import onnxruntime as ort
    from onnx import TensorProto
    a = a if a.flags.c_contiguous else a.copy(order="C")  # not np.ascontiguousarray: it makes a scalar 1-d
    if _bf16(a):
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(a)


def _host(v: Any) -> Any:
    """An output value as numpy; a bfloat16 one (which ONNX Runtime cannot hand to numpy) read as its bits."""
    if v.data_type() != "tensor(bfloat16)":
        return v.numpy()
    import ctypes

    import ml_dtypes
    raw = ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes())
    return np.frombuffer(raw, dtype=np.uint16).copy().view(ml_dtypes.bfloat16).reshape(v.shape())


# What ONNX Runtime's CPU provider does with a dtype it has no kernel for: said with a dtype-changed finding.
REMEDY = ("ONNX Runtime inserts casts where its kernels for this provider lack {want}: for real {want} numerics use "
          "a provider with {want} kernels (CUDA, TensorRT)")


def excluded(task: Task) -> tuple[str, ...]:
    """The nodes the user's flags leave float in a quantized cell: onnxruntime's nodes_to_exclude."""
    return quantizer_nodes(task.flags, "ort", NODE_FLAGS, task.precision)["nodes_to_exclude"]


def at_8_bits(task: Task) -> tuple[str, ...]:
    """The MatMul nodes the user's flags have an int4-weight cell quantize at 8 bits: a second MatMulNBitsQuantizer
    pass (bits=8) over those alone, the mixed scheme onnxruntime's tools make."""
    nodes = quantizer_nodes(task.flags, "ort", NODE_FLAGS, task.precision)["nodes_at_8_bits"]
    if nodes and task.precision.name != "int4-weight":
        raise UsageError(f"--backend-flag ort=nodes_at_8_bits=... sets MatMulNBits' bits in an int4-weight cell; this "
                         f"cell is {task.precision.name}")
    return nodes


# the node lists an ORT quantized cell takes from the user's flags
NODE_FLAGS = ("nodes_to_exclude", "nodes_at_8_bits")


class OrtBackend(Backend):
    name = "ort"
    kinds = frozenset({TORCH, ONNX})
    independent = True  # its own kernel for every op and its own reading of each opset
    cross_checks = frozenset({ONNX})  # the ONNX judge's fp32 cross-check (judging/judge.py)
    requires = ("onnxruntime",)
    extra = "ort"
    artifacts = (".onnx",)
    # nodes_to_exclude=NODE,NODE: a quantized cell's nodes its quantizer leaves float; nodes_at_8_bits=NODE,NODE: an
    # int4-weight cell's MatMuls quantized at 8 bits
    takes_flags = True

    def prepare_task(self, task: Task) -> Prepared:
        excluded(task), at_8_bits(task)  # refused here in one line
        path, info = cell_graph(task)
        # the optimized graph goes to this cell's own scratch folder, never beside the cached graph: two runs of the
        # same model at once would write one file while the other reads it (a torn file, a false error)
        scratch = _scratch()
        optimized = scratch / "optimized.onnx"
        with stage(LOAD, "onnxruntime"):
            session = open_session(path, task.device, optimized)
        cell = prepared(feeder(session), info)
        cell.release = _remover(scratch)
        want = task.requested_dtype
        # an autocast graph or a program keeps ops wider on purpose: there the graph's own types are what it asks
        asked = None if task.precision.autocast is not None or task.is_program else want
        cell.support = kernel_support(path, optimized if optimized.exists() else None, provider(task.device), asked)
        if want in ("float16", "bfloat16") and optimized.exists():
            counts = op_dtypes(optimized)
            if sum(counts.values()):
                cell.op_dtypes = dict(counts)
                cell.computed_dtype = mixed_dtype(counts, want)
                cell.dtype_remedy = REMEDY.format(want=want)
                # an autocast graph or a program keeps ops wider on purpose: the share is judged on what it asked for
                if task.precision.autocast is not None or task.is_program:
                    cell.planned_op_dtypes = dict(op_dtypes(path))
        return cell

    def handed(self, task: Task) -> tuple[Any, list[Any], list[str] | None]:
        """A torch model's cell runs its ONNX export (the cell's own, cached file), as an ONNX model's runs its
        graph."""
        import onnx
        return onnx.load(str(task.onnx_file())), list(task.inputs()), None

    def read_artifact(self, path: Path) -> Artifact:
        return read_onnx(path)

    def prepare_artifact(self, task: Task, path: Path) -> Prepared:
        """The user's ONNX file as ONNX Runtime runs it, with the float ops its optimized graph ran counted by dtype
        (its CPU provider runs many float16 nodes in float32: the dtype-changed rule reads the count)."""
        scratch = _scratch()  # the optimized graph, read once and removed
        optimized = scratch / "optimized.onnx"
        with stage(LOAD, "onnxruntime"):
            session = open_session(path, task.device, optimized)
        cell = Prepared(feeder(session), support=kernel_support(path, optimized if optimized.exists() else None,
                                                                provider(task.device), None),
                        release=_remover(scratch))
        if optimized.exists():
            counts = op_dtypes(optimized)
            cell.op_dtypes = dict(counts) or None
            cell.planned_op_dtypes = dict(op_dtypes(path)) or None
            low = next((d for d in ("float16", "bfloat16") if counts.get(d) or (cell.planned_op_dtypes or {}).get(d)),
                       None)
            if low:
                cell.dtype_remedy = REMEDY.format(want=low)
        return cell

    def prepare_quantized(self, task: Task) -> Prepared:
        """The cell's fp32 graph quantized by onnxruntime.quantization as its users run it (the graph pre-processed,
        then QDQ static, dynamic or 4-bit MatMulNBits), cached by model, format and calibration; run with every
        graph optimization on (what deploys). Read back: the optimized graph's integer and float ops, every
        activation quantizer's values (a second session with them as outputs, kept only where its outputs are the
        cell's bit for bit), and, where the optimizations change the numbers, which of its transformers does."""
        scheme = task.precision.name
        info: dict[str, Any] = {}
        if task.given:
            quantized, tool = Path(task.given), f"the file itself ({Path(task.given).name})"
        else:
            quantized, info = self._quantized(task)
            tool = quantizing_tool(scheme, quantized, excluded(task), at_8_bits(task))
        scratch = _scratch()
        optimized = scratch / "optimized.onnx"
        with stage(LOAD, "onnxruntime"):
            session = open_session(quantized, task.device, optimized)
        record: dict[str, Any] = {"graph": str(quantized), "tool": tool,
                                  "component": f"the file {quantized.name}" if task.given else QUANTIZE,
                                  **(integer_ops(optimized) if optimized.exists() else {}), **float_graph(task)}
        values: dict[str, Any] = {}
        cell = prepared(reading_back(session, quantized, task.device, record, values), {**info, "quantized_by": tool})
        cell.release, cell.quantized, cell.read_back = _remover(scratch), record, values
        return cell

    @staticmethod
    def _quantized(task: Task) -> tuple[Path, dict[str, Any]]:
        """The cell's fp32 graph (a torch model's export, checked) quantized in the task's format by ORT's tools."""
        from fpdiff.onnxtools.quantize import qdq_graph
        _, info = cell_graph(task.at(prec.FP32))
        return qdq_graph(task, excluded(task), at_8_bits(task)), info

    def prepare_marked(self, task: Task) -> Prepared:
        """The cell's graph with every float value its nodes produce as an output; ONNX Runtime may fuse otherwise
        than in the cell (a marked value cannot be fused away), which locate says beside its answer."""
        import onnx
        path, info = cell_graph(task)
        model, names = marked(onnx.load(str(path)))
        with stage(LOAD, "onnxruntime"):
            session = open_session(model, task.device)
        marked_cell = prepared(feeder(session, names), info)
        marked_cell.output_names = names
        return marked_cell

    def repro(self, r: Repro) -> str | None:
        if not r.onnx_segment:
            from fpdiff.onnxtools.export import export_program
            export_program(r.program, r.out / "segment.onnx")
        return "import onnxruntime as ort\n" + NUMPY_INPUTS + """segment = str(here / "segment.onnx")
session = ort.InferenceSession(segment, providers=["CPUExecutionProvider"])
names = [i.name for i in session.get_inputs()]
outs = session.run(None, {n: as_np(x, d) for n, x, d in zip(names, xs, meta["input_dtypes"])})
"""


# the ops of ONNX Runtime's optimized graph that compute in integers (or on int4 weights), and the float compute ops
# that a quantized graph should not leave float
INTEGER_OPS = frozenset({"QLinearConv", "QLinearMatMul", "MatMulInteger", "ConvInteger", "DynamicQuantizeMatMul",
                         "MatMulIntegerToFloat", "QGemm", "QAttention", "MatMulNBits", "QLinearAdd", "QLinearMul",
                         "QLinearSigmoid", "QLinearLeakyRelu", "QLinearAveragePool", "QLinearGlobalAveragePool",
                         "QLinearConcat", "QLinearSoftmax", "QLinearReduceMean", "QEmbedLayerNormalization",
                         "DynamicQuantizeLSTM", "QLinearConvTranspose", "QLinearWhere"})
FLOAT_COMPUTE = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "FusedConv", "FusedGemm", "FusedMatMul",
                           "NchwcConv", "Attention", "MultiHeadAttention"})



# a requantization may round the other way by one step of its grid: a quantized tensor that moves further has moved
ROUNDING_STEPS = 1.0
# ONNX Runtime's graph transformers a quantized cell is bisected over when its optimizations change the numbers
# (each disabled alone, by the name InferenceSession's disabled_optimizers takes): its QDQ fusions first.
# ReluQuantRewrite is a rule of Level2_RuleBasedTransformer (ReluQuantFusion), which takes a rule's name alone
# WeightBiasQuantization (Level 1) rounds a QDQ Conv's or Gemm's float bias to int32 at input x weight scale.
TRANSFORMERS = ("QDQSelectorActionTransformer", "QDQPropagationTransformer", "QDQS8ToU8Transformer", "ReluQuantRewrite",
                "DoubleQDQPairsRemover", "QDQFinalCleanupTransformer", "WeightBiasQuantization",
                "EnsureUniqueDQForNodeUnitTransformer", "MatMulIntegerToFloatFusion", "DynamicQuantizeMatMulFusion",
                "MatMulNBitsFusion", "ConstantFolding",
                "GeluFusion", "FastGeluFusion", "BiasGeluFusion", "QuickGeluFusion", "LayerNormFusion",
                "SimplifiedLayerNormFusion", "SkipLayerNormFusion", "AttentionFusion", "MatMulScaleFusion",
                "MatMulAddFusion", "GemmActivationFusion", "BiasSoftmaxFusion", "NchwcTransformer",
                "TransposeOptimizer", "ReshapeFusion", "ConstantSharing", "CommonSubexpressionElimination")


def reading_back(session: Any, quantized: Path, device: str, record: dict[str, Any],
                 into: dict[str, Any]) -> Callable[..., list[Any]]:
    """run(*inputs) for the cell; its first run also reads every activation quantizer's values `into` a dict by
    tensor, from a session with them as outputs, where that session's outputs are the cell's bit for bit (marking a
    value as an output can stop a fusion: then nothing is read back, and the record says so)."""
    def marked(model: Any, inputs: tuple) -> list[Any]:
        with stage(LOAD, "onnxruntime"):
            return feeder(open_session(model, device))(*inputs)

    def optimizer(inputs: tuple) -> None:
        record["optimizer"] = optimizer_effect(quantized, device, [_to_numpy(t) for t in inputs])
    return read_back_on_first_run(feeder(session), quantized, record, into, marked, optimizer)


def optimizer_effect(quantized: Path, device: str, feeds: list[Any]) -> dict[str, Any]:
    """Whether ONNX Runtime's graph optimizations change the quantized model's numbers, all on against all off on
    the same inputs: at its outputs (relative L2), and at its quantized tensors (the program with them marked as
    outputs, in steps of their grid: a rewrite can move a kernel by steps that later quantizers absorb); and where
    either moves, which of its transformers, each disabled alone, takes the change away."""
    import onnx
    import onnxruntime as ort

    from fpdiff.onnxtools.emulate import marked_quantizers, quantized_outputs
    model = onnx.load(str(quantized))
    marked, names = marked_quantizers(model)
    kinds = quantized_outputs(model)
    plain, inside = model.SerializeToString(), marked.SerializeToString()
    made_from = {n.output[0]: n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}

    def outputs(graph: bytes, level: Any = None, disabled: tuple[str, ...] = ()) -> list[np.ndarray]:
        opts = ort.SessionOptions()
        if level is not None:
            opts.graph_optimization_level = level
        s = ort.InferenceSession(graph, opts, providers=[provider(device)], disabled_optimizers=list(disabled))
        return list(s.run(None, dict(zip([i.name for i in s.get_inputs()], feeds))))

    def change(a: list[np.ndarray], b: list[np.ndarray]) -> float:  # the one relative L2, over every output
        return compare.rel_l2(np.concatenate([np.asarray(y, np.float64).ravel() for y in b]),
                              np.concatenate([np.asarray(x, np.float64).ravel() for x in a]))

    with stage(LOAD, "onnxruntime"):
        off, on = outputs(plain, ort.GraphOptimizationLevel.ORT_DISABLE_ALL), outputs(plain)
        moved = change(on, off)
        found: dict[str, Any] = {"changes_numbers": moved}
        if moved > 0:
            found["by"] = [t for t in TRANSFORMERS if change(outputs(plain, disabled=(t,)), off) <= 0.1 * moved]
        if names:
            def apart(pos: list[np.ndarray]) -> dict[str, float]:  # the tensors (by what each quantizes) that moved
                steps = {made_from.get(n, n): float(np.abs(p - q).max(initial=0.0))
                         for n, p, q in zip(names, pos, kernels_off)}
                return {t: d for t, d in steps.items() if d > ROUNDING_STEPS}
            kernels_off = _positions(outputs(inside, ort.GraphOptimizationLevel.ORT_DISABLE_ALL), names, kinds)
            moved_kernels = apart(_positions(outputs(inside), names, kinds))
            if moved_kernels:
                found["moves_quantized"] = moved_kernels
                found["by_kernels"] = [t for t in TRANSFORMERS
                                       if not apart(_positions(outputs(inside, disabled=(t,)), names, kinds))]
    return found


def _positions(outs: list[Any], names: list[str], kinds: dict[str, int]) -> list[np.ndarray]:
    """The marked program's quantized tensors (its last outputs) as positions on their grids (fp8 from the bit
    patterns ONNX Runtime hands back), so a difference counts steps."""
    from fpdiff.onnxtools.emulate import FP8_E4M3FN, grid_position, held
    return [grid_position(held(x, kinds.get(n) == FP8_E4M3FN), kinds.get(n, 0))
            for n, x in zip(names, outs[-len(names):])]


def integer_ops(optimized: Path) -> dict[str, Any]:
    """What ONNX Runtime's optimized graph computes in integers (its quantized kernels, by op type) and which compute
    nodes it left in float: a layer the quantizer or the fusions left float is the quantized dtype-changed."""
    import onnx
    m = onnx.load(str(optimized), load_external_data=False)
    ints: Counter = Counter()
    left: list[str] = []
    for node in _all_nodes(m.graph):
        if node.op_type in INTEGER_OPS:
            ints[node.op_type] += 1
        elif node.op_type in FLOAT_COMPUTE:
            left.append(f"{node.op_type} {node.name}".strip())
    return {"integer_ops": dict(ints), "float_ops": len(left), "left_float": left[:32]}


# Support in ONNX Runtime's own words: its kernel registry per provider, op, opset range and type constraint, read
# against the graph a cell hands it, and the optimized graph it ran (where it inserted casts).
SUPPORT_OPS = 64  # op types recorded per graph: a one-op case needs one; a whole model must not flood the report
_ORT_TYPES = {1: "float", 10: "float16", 16: "bfloat16", 11: "double"}  # TensorProto float types, as ORT spells them
_DTYPES = {"float": "float32", "float16": "float16", "bfloat16": "bfloat16", "double": "float64"}
# what InsertCastTransformer widens a float16 node with no float16 kernel to on the CPU provider; bfloat16 has no
# such fallback (a bfloat16 node with no bfloat16 kernel is refused: "Could not find an implementation for Add(14)")
_CAST_TO = "float"
# casts convert between types (every float type has a kernel): their input type is no precision the cell asks for
_CASTS = {"Cast", "CastLike"}


def provider(device: str) -> str:
    """The execution provider ort_session opens for a device."""
    return "CUDAExecutionProvider" if device.startswith("cuda") else "CPUExecutionProvider"


@functools.cache
def kernel_table(provider_name: str) -> dict[tuple[str, str], list[tuple[int, int, dict[str, list[str]]]]]:
    """(domain, op) -> [(first opset, last opset, type constraints)] of the kernels this onnxruntime registers for a
    provider; read once per process (1,500 entries on the CPU provider)."""
    from onnxruntime.capi import _pybind_state
    table: dict[tuple[str, str], list[tuple[int, int, dict[str, list[str]]]]] = {}
    for k in _pybind_state.get_all_opkernel_def():
        if k.provider == provider_name:
            lo, hi = k.version_range
            table.setdefault((_domain(k.domain), k.op_name), []).append((lo, hi, dict(k.type_constraints)))
    return table


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def kernel_types(provider_name: str, domain: str, op: str, version: int, type_param: str | None) -> list[str]:
    """The element types this provider has a kernel for at `op`'s opset `version`, for the type constraint the
    input binds to (every constraint when it is not known); [] when it has no kernel for the op at that version."""
    types: set[str] = set()
    for lo, hi, constraints in kernel_table(provider_name).get((_domain(domain), op), []):
        if lo <= version <= hi:
            lists = [constraints[type_param]] if type_param in constraints else list(constraints.values())
            types.update(t.removeprefix("tensor(").removesuffix(")") for ts in lists for t in ts)
    return sorted(types)


def _schema(node: Any, opsets: dict[str, int]) -> Any:
    """The op's ONNX schema at the graph's opset, None for an op onnx does not define (a contrib op)."""
    import onnx
    try:
        return onnx.defs.get_schema(node.op_type, opsets.get(_domain(node.domain), 1), _domain(node.domain))
    except onnx.defs.SchemaError:
        return None


def _float_input(node: Any, types: dict[str, int]) -> tuple[int, str] | None:
    """(position, ORT type name) of the node's first float input: the value whose precision the cell asks about."""
    for i, name in enumerate(node.input):
        if types.get(name) in _ORT_TYPES:
            return i, _ORT_TYPES[types[name]]
    return None


def _type_param(schema: Any, position: int) -> str | None:
    """The type constraint an input position binds to (the last formal input for a variadic tail)."""
    if schema is None or not schema.inputs:
        return None
    return schema.inputs[min(position, len(schema.inputs) - 1)].type_str


def _ran_types(optimized: Any) -> tuple[dict[str, set[str]], list[str]]:
    """Per op type of the optimized graph, the float types its nodes computed in; and its op types in order."""
    types = value_types(optimized)
    ran: dict[str, set[str]] = {}
    for node in optimized.graph.node:
        got = _float_input(node, types)
        if got:
            ran.setdefault(node.op_type, set()).add(got[1])
    return ran, list(dict.fromkeys(n.op_type for n in optimized.graph.node))


def kernel_support(handed: Path, optimized: Path | None, provider_name: str,
                   want: str | None = None) -> Support:
    """Per op type of the graph handed to ONNX Runtime (its first float input's type is the one asked): the kernel
    types the provider registers for it at the graph's opset, what the optimized graph computed it in, and the
    state that makes (native, other-dtype: casts inserted or its function body run otherwise); at most SUPPORT_OPS.
    `want`: the cell's dtype, when an op the graph itself holds in another type (a cast graph keeps an op whose
    ONNX schema lacks the dtype at this opset in float32) is computed in another dtype than the cell asked."""
    import onnx
    import onnxruntime
    model = onnx.load(str(handed), load_external_data=False)
    types = value_types(model)
    opsets = {_domain(o.domain): o.version for o in model.opset_import}
    ran, after = _ran_types(onnx.load(str(optimized), load_external_data=False)) if optimized is not None else ({}, [])
    ops: dict[str, dict[str, Any]] = {}
    more = 0
    for node in model.graph.node:
        got = _float_input(node, types)
        if got is None or node.op_type in ops or node.op_type in _CASTS:
            continue
        if len(ops) >= SUPPORT_OPS:
            more += 1
            continue
        schema = _schema(node, opsets)
        version = schema.since_version if schema is not None else opsets.get(_domain(node.domain), 1)
        registered = kernel_types(provider_name, node.domain, node.op_type, version, _type_param(schema, got[0]))
        ops[node.op_type] = _op_support(node.op_type, version, got[1], registered, ran, after, provider_name)
        if want is not None and _DTYPES[got[1]] != want:
            ops[node.op_type].update(state="other-dtype", said=f"the graph handed to ONNX Runtime holds {node.op_type} "
                                     f"in {_DTYPES[got[1]]}, not {want} (a cast graph keeps an op whose schema, "
                                     f"{node.op_type}-{version}, lacks {want}; or the graph's own casts)", asked=want)
    return Support(f"onnxruntime {onnxruntime.__version__} {provider_name}", ops,
                   not_recorded={"ops": more} if more else {})


def _op_support(op: str, version: int, asked: str, registered: list[str], ran: dict[str, set[str]],
                after: list[str], provider_name: str) -> dict[str, Any]:
    """One op type's record: a kernel at the asked type is native; a session that opened without one computed it
    otherwise: through casts around a kernel of another type, or through the op's function body."""
    where = f"{op} (opset {version}) on {provider_name}"
    # only the float types are recorded: the cell asks about a float precision, and the int list is long
    entry: dict[str, Any] = {"asked": _DTYPES[asked], "kernel_types": [t for t in registered if t in _DTYPES]}
    ran_as = sorted(_DTYPES[t] for t in ran.get(op, ()))
    if ran_as:
        entry["ran"] = ran_as
    if asked in registered and (not ran_as or _DTYPES[asked] in ran_as):
        entry.update(state="native", said=f"{where} registers a {asked} kernel")
    elif asked in registered:  # a kernel at the asked type, yet the optimized graph computes the op otherwise
        entry.update(state="other-dtype", said=f"{where} registers a {asked} kernel, but the optimized graph "
                     f"computes it in {', '.join(ran_as)}")
    elif registered:
        wide = ", ".join(ran_as) or _DTYPES.get(_CAST_TO, _CAST_TO)
        entry.update(state="other-dtype", said=f"{where} registers no {asked} kernel (float kernels: "
                     f"{', '.join(entry['kernel_types']) or 'none'}): ONNX "
                     f"Runtime inserted casts and computed it in {wide}")
    else:
        body = [o for o in after if o != "Cast"]
        widened = sorted({_DTYPES[t] for o in body for t in ran.get(o, ())} - {_DTYPES[asked]})
        entry["state"] = "other-dtype" if widened else "native"
        entry["said"] = (f"{where} registers no kernel: ONNX Runtime ran its function body ({', '.join(body[:8])})"
                         + (f" in {', '.join(widened)}" if widened else f" in {_DTYPES[asked]}"))
    return entry


# ONNX's element types as numpy's names, for a converted file's declaration
_ELEM = {1: "float32", 10: "float16", 16: "bfloat16", 11: "float64", 7: "int64", 6: "int32", 5: "int16", 3: "int8",
         2: "uint8", 9: "bool"}


def read_onnx(path: Path) -> Artifact:
    """An ONNX file's declared inputs and outputs (initializers aside), and the precision its float arithmetic asks
    for: the dtype most of its float nodes compute in (counted as check counts a backend's ran ops)."""
    import onnx
    model = onnx.load(str(path), load_external_data=False)
    inits = {t.name for t in model.graph.initializer}

    def spec(v: Any) -> TensorSpec:
        t = v.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        return TensorSpec(v.name, dims, _ELEM.get(t.elem_type, f"onnx type {t.elem_type}"))
    counts = op_dtypes(path)
    low = {d: n for d, n in counts.items() if d in ("float16", "bfloat16")}
    top = max(counts, key=lambda d: counts[d]) if counts else "float32"
    precision = prec.of_dtype(top)
    why = f"{counts.get(top, 0)} of {sum(counts.values())} float nodes compute in {top}" + \
        (f" ({', '.join(f'{n} in {d}' for d, n in low.items())})" if low and top not in low else "")
    return Artifact(str(path), [spec(v) for v in model.graph.input if v.name not in inits],
                    [spec(v) for v in model.graph.output], precision, why)
