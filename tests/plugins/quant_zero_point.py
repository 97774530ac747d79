"""ONNX Runtime with a planted kernel bug in quantized cells: it dequantizes one activation with its zero point off
by SHIFT steps (the flag `shift=N` sets another), while it reports the quantized graph it was given. The cell's
numbers depart from the format's exact emulation by about SHIFT steps of that tensor at the kernel that reads it;
quant must call it mismatch and name that kernel. A cell with no such zero point runs as ONNX Runtime does."""
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from fpdiff.backends.base import Prepared
from fpdiff.backends.ort import OrtBackend, open_session, reading_back

SHIFT = 3


class ZeroPointOrt(OrtBackend):
    name = "ort-zero-point"
    takes_flags = True
    cross_checks = frozenset()  # ort is the ONNX judge's cross-check; this one is not

    def prepare_quantized(self, task):
        cell = super().prepare_quantized(task)
        shift = next((int(f.removeprefix("shift=")) for f in task.flags if f.startswith("shift=")), SHIFT)
        model = shifted(onnx.load(cell.quantized["graph"]), shift)
        if model is None:
            return cell
        bad = Path(tempfile.mkdtemp()) / "bad.onnx"
        onnx.save(model, str(bad))
        cell.close()
        record, values = dict(cell.quantized), {}
        return Prepared(reading_back(open_session(bad, task.device), bad, task.device, record, values),
                        info={"planted": f"zero point +{shift}"}, quantized=record, read_back=values)


def shifted(m, shift: int):
    """The graph with the zero point of the middle activation DequantizeLinear moved by `shift`; None without one."""
    inits = {t.name: t for t in m.graph.initializer}
    dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear" and len(n.input) > 2 and n.input[0]
          not in inits and n.input[2] in inits]
    if not dq:
        return None
    node = dq[len(dq) // 2]
    zp = inits[node.input[2]]
    v = numpy_helper.to_array(zp)
    moved = np.clip(v.astype(np.int32) + shift, np.iinfo(v.dtype).min, np.iinfo(v.dtype).max).astype(v.dtype)
    new = numpy_helper.from_array(moved, zp.name + "_shifted")
    m.graph.initializer.append(new)
    node.input[2] = new.name
    return m
