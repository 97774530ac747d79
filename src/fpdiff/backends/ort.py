"""ONNX Runtime: CPU execution provider (CUDA EP where installed), on the exported or given ONNX graph."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fpdiff.backends import to_numpy as _to_numpy
from fpdiff.backends.base import NUMPY_INPUTS, ONNX, TORCH, Backend, Prepared, Repro, Task
from fpdiff.core.dtypes import mixed_dtype
from fpdiff.core.errors import LOAD, ONNX_EXPORT, StageError, Unsupported, stage
from fpdiff.onnxtools.graph import DATA_MOVEMENT, ort_session, value_types
from fpdiff.onnxtools.marked import marked


def op_dtypes(model_path: Path) -> Counter:
    """Count arithmetic nodes of an (ORT-optimized) graph by the float type they compute in."""
    import onnx
    m = onnx.load(str(model_path))
    types = value_types(m)
    names: dict[int, str] = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16",
             onnx.TensorProto.BFLOAT16: "bfloat16", onnx.TensorProto.DOUBLE: "float64"}
    counts: Counter = Counter()
    for node in m.graph.node:
        if node.op_type in DATA_MOVEMENT:
            continue
        float_types = [names[types[n]] for n in node.input if types.get(n) in names]
        if float_types:
            counts[max(set(float_types), key=float_types.count)] += 1
    return counts


# How ONNX Runtime names the op it has no kernel for: "Failed to find kernel for AveragePool(1)", "Could not find
# an implementation for Add(6) node with name ''" (the op and its opset version; the wording differs by dtype).
_KERNEL_OP = re.compile(r"(?:kernel for|implementation for) (?P<op>[\w.]+)\((?P<version>\d+)\)")


def open_session(model: Path | Any, device: str, optimized: Path | None = None) -> Any:
    """The session, with ONNX Runtime's NOT_IMPLEMENTED status (its kernel registry has no kernel for this op, op
    version and types) raised as its declared refusal, whatever the message's wording."""
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
    try:
        return ort_session(model, device, optimized_to=optimized)
    except OrtNotImplemented as e:
        m = _KERNEL_OP.search(str(e))
        op = f"{m['op']} (opset {m['version']})" if m else None
        raise Unsupported(" ".join(str(e).split()), op=op) from e


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


def prepared(run: Callable[..., list[Any]], info: dict[str, Any]) -> Prepared:
    """A Prepared with the exporter's record: shown in info, its float64 departure also the typed field check
    reads."""
    departure = info.get("onnx_export_departure")
    return Prepared(run, info=info, export_departure=float(departure) if departure is not None else None)


def feeder(session: Any, outputs: list[str] | None = None) -> Callable[..., list[Any]]:
    """run(*inputs) for a session: the inputs fed by the session's input names, the named outputs (all: None)
    returned in that order."""
    names = [i.name for i in session.get_inputs()]

    def run(*inputs: Any) -> list[Any]:
        return session.run(outputs, {n: _to_numpy(t) for n, t in zip(names, inputs)})
    return run


# What ONNX Runtime's CPU provider does with a dtype it has no kernel for: said with a dtype-changed finding.
REMEDY = ("ONNX Runtime inserts casts where its kernels for this provider lack {want}: for real {want} numerics use "
          "a provider with {want} kernels (CUDA, TensorRT)")


class OrtBackend(Backend):
    name = "ort"
    kinds = frozenset({TORCH, ONNX})
    independent = True  # its own kernel for every op and its own reading of each opset
    cross_checks = frozenset({ONNX})  # the ONNX judge's fp32 cross-check (check/judge.py)
    requires = ("onnxruntime",)
    extra = "ort"

    def prepare_task(self, task: Task) -> Prepared:
        path, info = cell_graph(task)
        optimized = path.with_name(path.stem + f".ort-{task.device.replace(':', '')}.onnx")
        with stage(LOAD, "onnxruntime"):
            session = open_session(path, task.device, optimized)
        cell = prepared(feeder(session), info)
        want = task.requested_dtype
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
