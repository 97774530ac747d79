"""LiteRT with a planted bug in int8 and int8-dynamic cells: the .tflite it runs has its first convolution's weights off
by SHIFT steps (a converter writing the weights with a wrong zero point), while it reports the honest quantized model
as the one it ran. An int8 cell's quantizers are read back from the marked file with the same weights, so the kernel
rule must name the convolution; without read-back, the output-level rule cannot tell it from the format's own cost.
An int8-dynamic cell has no quantizer in the file to read back: the output-level rule judges it."""
import shutil
from pathlib import Path

import numpy as np

from fpdiff.backends.litert import MARKED, LiteRtBackend, quantized_cell, read_file

SHIFT = 8


class PlantedWeightLiteRt(LiteRtBackend):
    name = "litert-planted"

    def prepare_quantized(self, task):
        cell = super().prepare_quantized(task)
        if task.precision.name not in ("int8", "int8-dynamic"):
            return cell  # its weights are int4: nothing planted
        honest = Path(cell.artifact)
        bad = honest.with_name(f"planted-{task.precision.name}.tflite")
        bad.write_bytes(planted(honest, SHIFT))
        if task.precision.name == "int8-dynamic":
            cell.close()
            return quantized_cell(bad, cell.quantized, {**cell.info, "planted": f"weights +{SHIFT} steps"})
        marked = bad.with_suffix(MARKED)  # its quantizers read back from the same planted weights
        marked.write_bytes(planted(honest.with_suffix(MARKED), SHIFT))
        shutil.copy(honest.with_suffix(MARKED).with_suffix(".json"), marked.with_suffix(".json"))
        cell.close()
        quantized = {k: v for k, v in cell.quantized.items() if not k.startswith("read_back")}
        return quantized_cell(bad, quantized, {**cell.info, "planted": f"weights +{SHIFT} steps"}, marked)


def planted(path: Path, shift: int) -> bytes:
    """The file's bytes with its first convolution's int8 weights moved by `shift` steps."""
    from ai_edge_litert.interpreter import Interpreter
    view = read_file(path)
    conv = next(o for o in view.ops if o["op_name"] == "CONV_2D")
    it = Interpreter(model_path=str(path))
    raw = it.get_tensor(int(conv["inputs"][1])).tobytes()
    data = bytearray(path.read_bytes())
    at = data.find(raw)
    assert at >= 0 and data.find(raw, at + 1) < 0, "the weights' bytes are not found once in the file"
    weights = np.clip(np.frombuffer(raw, np.int8).astype(np.int16) + shift, -127, 127)
    data[at:at + len(raw)] = weights.astype(np.int8).tobytes()
    return bytes(data)
