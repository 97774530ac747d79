"""ORT's fast path for locate: every tensor marked as an output in one run, each judged against float64 and
against the reference evaluator at the same precision. Marking outputs can change what ORT fuses, so a bug that
lives in a fusion may vanish here: the segment bisection is the default for that reason."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.errors import MESSAGE_CHARS, UsageError


@dataclass
class TensorVerdict:
    """One marked tensor: ORT's error at the precision, the reference evaluator's, and the check verdict."""
    tensor: str
    node: str
    op: str
    status: str
    rel_l2: float
    baseline_rel_l2: float | None
    reason: str


@dataclass
class MarkAll:
    tensors: int
    first_departure: TensorVerdict | None = None  # the first `mismatch` in graph order: where ORT departs
    rows: list[TensorVerdict] = field(default_factory=list)
    refused: str | None = None  # ORT would not run the marked graph: its words

    def as_dict(self) -> dict:
        d = asdict(self)
        if self.refused is None:
            d.pop("refused")
        return d


def mark_all(model: onnx.ModelProto, feeds: dict[str, np.ndarray], p: prec.Precision, device: str = "cpu") -> MarkAll:
    """Per float tensor in graph order: ORT's error at P and the baseline's, both against float64, with the
    check verdict; the first `mismatch` is where ORT departs."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    from fpdiff.onnxtools.export import FLOATS, ONNX_TYPE, cast_model
    from fpdiff.onnxtools.graph import float64_values, ort_session
    if not p.is_cast or p.name == "bf16":
        raise UsageError("--mark-all takes fp64, fp32 or fp16")
    m64 = onnx.shape_inference.infer_shapes(cast_model(model, ONNX_TYPE["float64"]))
    mp = onnx.shape_inference.infer_shapes(cast_model(model, ONNX_TYPE[prec.dtype_name(p.dtype)]))
    dtype = np.dtype(prec.dtype_name(p.dtype))
    feeds64 = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in feeds.items()}
    feedsp = {k: v.astype(dtype) if v.dtype.kind == "f" else v for k, v in feeds.items()}
    v64 = float64_values(m64, feeds64)
    try:
        vbase = ReferenceEvaluator(mp).run(None, feedsp, intermediate=True)
    except Exception:
        vbase = {}
    infos = {vi.name: vi for vi in list(mp.graph.value_info) + list(mp.graph.output)}
    names = [o for n in mp.graph.node for o in n.output
             if o in infos and infos[o].type.tensor_type.elem_type in FLOATS]
    marked = onnx.ModelProto()
    marked.CopyFrom(mp)
    present = {o.name for o in marked.graph.output}
    marked.graph.output.extend(infos[n] for n in names if n not in present)
    ort.set_default_logger_severity(4)  # a refused kernel is reported in the result, not logged to the terminal
    try:
        session = ort_session(marked, device)
        outs = dict(zip(names, session.run(names, feedsp)))
    except Exception as e:  # ORT refused the graph or a kernel: that is the answer, not an fpdiff failure
        return MarkAll(len(names), refused=" ".join(str(e).split())[:MESSAGE_CHARS])
    producer = {o: n for n in mp.graph.node for o in n.output}
    rows, first = [], None
    for name in names:
        ref = [np.asarray(v64[name], dtype=np.float64)]
        m = compare.measure(ref, [np.asarray(outs[name], dtype=np.float64)], p.compute)
        base = compare.measure(ref, [np.asarray(vbase[name], dtype=np.float64)], p.compute) if name in vbase else None
        j = compare.judge(m, p, base)
        node = producer[name]
        row = TensorVerdict(name, node.name, node.op_type, j.status, m.rel_l2, base.rel_l2 if base else None, j.reason)
        rows.append(row)
        if first is None and j.status == compare.MISMATCH:
            first = row
    return MarkAll(len(rows), first, rows)
