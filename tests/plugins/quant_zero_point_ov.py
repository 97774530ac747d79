"""OpenVINO with the planted kernel bug of quant_zero_point.py: its quantized cells compile a graph whose middle
activation DequantizeLinear has its zero point off by SHIFT steps, while they report the graph they were given. With
its quantized values read back (the marked program's outputs are the cell's bit for bit), quant must call the cell
mismatch and name that kernel; locate must put its departure there."""
import importlib.util
import tempfile
from pathlib import Path

import onnx
import openvino as ov

from fpdiff.backends.base import Prepared
from fpdiff.backends.openvino import OpenVinoBackend, reading_back

_spec = importlib.util.spec_from_file_location("quant_zero_point_shift",
                                               Path(__file__).with_name("quant_zero_point.py"))
_planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_planted)
SHIFT, shifted = _planted.SHIFT, _planted.shifted


class ZeroPointOpenVino(OpenVinoBackend):
    name = "openvino-zero-point"
    cross_checks = frozenset()

    def prepare_quantized(self, task):
        cell = super().prepare_quantized(task)
        model = shifted(onnx.load(cell.quantized["graph"]), SHIFT)
        if model is None:
            return cell
        bad = Path(tempfile.mkdtemp()) / "bad.onnx"
        onnx.save(model, str(bad))
        compiled = ov.Core().compile_model(ov.convert_model(str(bad)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        record, values = dict(cell.quantized), {}
        run = reading_back(self._runner(compiled, task), bad, record, values)
        return Prepared(run, info={"planted": f"zero point +{SHIFT}"}, quantized=record, read_back=values)
