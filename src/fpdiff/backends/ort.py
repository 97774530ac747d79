"""ONNX Runtime: CPU execution provider (CUDA EP where installed), on the exported or given ONNX graph."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from fpdiff.backends import mixed_dtype, too_wide
from fpdiff.backends import to_numpy as _to_numpy
from fpdiff.backends.base import NUMPY_INPUTS, ONNX, TORCH, Backend, Prepared, Repro
from fpdiff.core.compare import Finding
from fpdiff.core.errors import LOAD, ONNX_EXPORT, StageError, Unsupported, stage
from fpdiff.onnxtools.graph import DATA_MOVEMENT, ort_session, value_types


def op_dtypes(model_path: Path) -> Counter:
    """Count arithmetic nodes of an (ORT-optimized) graph by the float type they compute in."""
    import onnx
    m = onnx.load(str(model_path))
    types = value_types(m)
    names = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.FLOAT16: "float16",
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


def open_session(path: Path, device: str, optimized: Path):
    """The session, with ONNX Runtime's NOT_IMPLEMENTED status (its kernel registry has no kernel for this op, op
    version and types) raised as its declared refusal, whatever the message's wording."""
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
    try:
        return ort_session(path, device, optimized_to=optimized)
    except OrtNotImplemented as e:
        m = _KERNEL_OP.search(str(e))
        op = f"{m['op']} (opset {m['version']})" if m else None
        raise Unsupported(" ".join(str(e).split()), op=op) from e


def exported_graph_checked(path: Path, info: dict) -> None:
    """A torch export ONNX Runtime would refuse for its types (bfloat16 where the opset has none) is the
    exporter's invalid graph, not a kernel ONNX Runtime lacks: full type check before loading it."""
    import onnx

    from fpdiff.onnxtools.mixed import type_error
    why = type_error(onnx.load(str(path)))
    if why is not None:
        exporter = info.get("onnx_exporter", "")
        raise StageError(ONNX_EXPORT, f"torch.onnx {exporter}".strip(),
                         f"the exported graph is not valid ONNX (full type check): {why}")


class OrtBackend(Backend):
    name = "ort"
    kinds = frozenset({TORCH, ONNX})
    all_outputs = True
    verifies_onnx_plans = True
    independent = True  # its own kernel for every op and its own reading of each opset

    requires = ("onnxruntime",)

    def prepare_task(self, task) -> Prepared:
        path = task.onnx_file()
        optimized = path.with_name(path.stem + f".ort-{task.device.replace(':', '')}.onnx")
        info = {}
        if task.is_torch:
            from fpdiff.onnxtools.export import export_info
            info.update(export_info(path))  # which torch->ONNX exporter made the graph this cell ran
            exported_graph_checked(path, info)  # fpdiff's own cast graphs are checked where they are made (task)
        with stage(LOAD, "onnxruntime"):
            session = open_session(path, task.device, optimized)
        names = [i.name for i in session.get_inputs()]
        notes = []
        want = task.requested_dtype
        if want in ("float16", "bfloat16") and optimized.exists():
            counts = op_dtypes(optimized)
            total = sum(counts.values())
            if total:
                share = counts[want] / total
                info["op_dtypes"] = dict(counts)
                info["requested_dtype_share"] = round(share, 4)
                # an autocast graph keeps ops in float32 on purpose: judge the share against what it asked for
                planned = op_dtypes(path) if task.precision.autocast is not None else None
                asked = f" (the autocast graph asked for {planned[want]} of {sum(planned.values())})" if planned else ""
                if planned:
                    info["planned_op_dtypes"] = dict(planned)
                if too_wide(counts, want, planned):
                    notes.append(Finding("dtype-changed", f"ONNX Runtime ran {counts[want]} of {total} arithmetic ops "
                                         f"in {want}{asked}; the rest in {', '.join(k for k in counts if k != want)} "
                                         "through casts it inserted (its kernels for this provider lack the dtype)",
                                         remedy="judge this cell as mostly wider than asked; for real "
                                         f"{want} numerics use a provider with {want} kernels (CUDA, TensorRT)"))

        def run(*inputs):
            feed = {n: _to_numpy(t) for n, t in zip(names, inputs)}
            return session.run(None, feed)

        return Prepared(run, mixed_dtype(info.get("op_dtypes", {}), want), notes, info)

    def repro(self, r: Repro) -> str | None:
        if not r.onnx_segment:
            from fpdiff.onnxtools.export import export_program
            export_program(r.program, r.out / "segment.onnx")
        return "import onnxruntime as ort\n" + NUMPY_INPUTS + """segment = str(here / "segment.onnx")
session = ort.InferenceSession(segment, providers=["CPUExecutionProvider"])
names = [i.name for i in session.get_inputs()]
outs = session.run(None, {n: as_np(x, d) for n, x, d in zip(names, xs, meta["input_dtypes"])})
"""
