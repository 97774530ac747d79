"""A verified quantized plan written as what each quantizer's users ship (`--export TARGET=PATH`): the quantized file
the plan's last trial ran (ONNX Runtime's or NNCF's quantized .onnx, ai-edge-quantizer's .tflite) with the
quantizer's own settings beside it (a JSON of the call and its node lists; ai-edge-quantizer's own recipe JSON,
which its load_quantization_recipe reads), each file then judged again as a user's quantized file against the float
model: the export is verified when that cell meets the plan's tolerance."""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from fpdiff.analysis.plan.search import Export, ExportRun, Plan
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell

# what a quantized plan exports, by backend: the target name, the file the trial's cell names (its info key) and
# the suffix the user's path must have
TARGETS: dict[str, dict[str, tuple[str, str]]] = {
    "ort": {"onnx": ("quantized_graph", ".onnx")},
    "openvino": {"onnx": ("quantized_graph", ".onnx")},  # NNCF's quantized ONNX, which OpenVINO converts and runs
    "litert": {"litert": ("tflite", ".tflite")},
    "iree": {"onnx": ("quantized_graph", ".onnx")},  # the QDQ graph it compiles
}
# the settings file written beside the quantized file
SETTINGS = ".quantizer.json"
RECIPE = ".recipe.json"  # ai-edge-quantizer's own recipe, written beside the .tflite it made


def requested(backend: str, exports: Mapping[str, str]) -> dict[str, str]:
    """The targets asked of a quantized plan, each one this backend's quantizer ships, its path of the target's
    kind: refused in one line before any work."""
    known = TARGETS.get(backend, {})
    for target, path in exports.items():
        if target not in known:
            raise UsageError(f"a quantized plan on {backend} exports {', '.join(known) or 'nothing'} (the quantized "
                             f"file its quantizer made, with its settings), not {target}")
        suffix = known[target][1]
        if Path(path).suffix.lower() != suffix:
            raise UsageError(f"--export {target}={path}: the file is a {suffix}")
        if not Path(path).resolve().parent.is_dir():
            raise UsageError(f"--export {target}={path}: no such folder")
    return dict(exports)


def write_all(plan: Plan, cell: Cell, wanted: Mapping[str, str], settings: dict,
              judge: Callable[[str], Cell]) -> list[Export]:
    """Each target written from the plan's last trial `cell`, its settings beside it, and judged again as the
    user's file (`judge(path)`: a quant cell of it against the float model)."""
    out = []
    for target, path in wanted.items():
        key = TARGETS[plan.backend][target][0]
        e = Export(target, str(path), tolerance=plan.tolerance)
        made = cell.info.get(key)
        if not made or not Path(str(made)).is_file():
            e.reason = f"the plan's last trial names no {key} file to write"
            out.append(e)
            continue
        shutil.copyfile(str(made), path)
        beside = Path(str(made)).with_suffix(RECIPE)
        if beside.is_file():
            shutil.copyfile(beside, Path(path).with_suffix(RECIPE))
        Path(path).with_suffix(SETTINGS).write_text(json.dumps(settings, indent=1) + "\n")
        e.written = True
        e.check = f"settings: {Path(path).with_suffix(SETTINGS).name}" + (
            f", recipe: {Path(path).with_suffix(RECIPE).name}" if beside.is_file() else "")
        again = judge(str(path))
        err = (again.metrics or {}).get("rel_l2")
        judged = again.status in (Status.PASS, Status.QUANTIZATION_LOSS) and err is not None
        passed = judged and float(err) <= plan.tolerance
        e.runs.append(ExportRun(plan.backend, plan.precision, float(err) if err is not None else None, passed,
                                None if judged else f"{again.status}: {again.reason}"[:300]))
        e.verified = passed
        if not passed:
            e.reason = (f"the written file errs {float(err):.3g} on {plan.backend} (tolerance {plan.tolerance:g})"
                        if judged else f"the written file did not judge on {plan.backend}: {again.reason}")[:600]
        out.append(e)
    return out
