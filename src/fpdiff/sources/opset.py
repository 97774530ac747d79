"""Old-opset ONNX graphs brought to the current opset before the judge sees them: old-opset semantics (Softmax's
2-D coercion before opset 13) are where reference evaluators and importers go wrong. The conversion is a stage
that can change numbers too, so it is checked (both graphs run by one witness) and dropped when the two disagree."""
from __future__ import annotations

from pathlib import Path

import numpy as np

# The opset sources are brought to: onnx 1.23's reference evaluator computes it as the spec says where it gets
# opset <= 12 Softmax wrong; ONNX Runtime 1.32 and IREE 3.13's importer read it.
TARGET_OPSET = 21
# The converted graph must reproduce the original within this relative L2 on the witness (same kernels, same
# order: the two agree to a few ulps of fp32 on ONNX Runtime, of fp64 on the reference evaluator; the fp32 check
# tolerance, 1e-5, would hide a real semantic change only if it were tiny).
AGREE = 1e-6
# Witnesses, in order. ONNX Runtime first: the reference evaluator misreads some old-opset semantics (Softmax's
# 2-D coercion before opset 13, opset-9 BatchNormalization), which is why graphs are converted at all. But ONNX
# Runtime has no kernels for opset < 7 (Add-6, Gemm-6, BatchNormalization-6...) and cannot load such a graph, so
# there the float64 reference evaluator, which runs every opset, checks the conversion.
ORT_WITNESS, REF_WITNESS = "onnxruntime fp32", "onnx reference evaluator float64"


def default_opset(model) -> int:
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def upgrade(model, feeds: dict[str, np.ndarray], out_dir: Path, stem: str):
    """(model to use, path to use or None, note): the converted model when it is checked, else the original."""
    import onnx
    from onnx import version_converter

    old = default_opset(model)
    note = {"opset": old}
    if old >= TARGET_OPSET:
        return model, None, note
    note["converted_to"] = TARGET_OPSET
    try:
        new = version_converter.convert_version(model, TARGET_OPSET)
        # the converter keeps the IR version (3 for the opset-9 zoo models, where every weight must also be a
        # graph input); the new opset needs the IR version that defines it, under which a graph cut out of the
        # model (locate's segments) may hold weights that are not inputs
        new.ir_version = max(new.ir_version, onnx.helper.find_min_ir_version_for(list(new.opset_import)))
        onnx.checker.check_model(new)
    except Exception as e:
        note.update(status="kept original", reason=f"onnx.version_converter failed: {_line(e)}")
        return model, None, note
    outs, why = _witness(model, new, feeds)
    if outs is None:
        note.update(status="kept original", reason=f"the conversion could not be checked: {why}")
        return model, None, note
    err = _rel_l2(*outs)
    note.update(checked_on=why, check_rel_l2=err)
    if not err <= AGREE:
        note.update(status="kept original",
                    reason=f"the converted graph departs from the original on {why} (rel L2 {err:.2e})")
        return model, None, note
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.opset{TARGET_OPSET}.onnx"
    onnx.save(new, str(path))
    note["status"] = "converted"
    return new, path, note


def _witness(old, new, feeds: dict[str, np.ndarray]) -> tuple[tuple | None, str]:
    """((outputs of old, outputs of new), the witness) from the first witness that runs both graphs, or
    (None, why none could)."""
    from fpdiff.onnxtools.graph import float64_values
    failed = []
    for name, run in ((ORT_WITNESS, _run_ort),
                      (REF_WITNESS, lambda m, f: float64_values(m, f, intermediate=False))):
        try:
            return (run(old, feeds), run(new, feeds)), name
        except Exception as e:
            failed.append(f"{name}: {_line(e)}")
    return None, "; ".join(failed)


def _run_ort(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    from fpdiff.onnxtools.graph import ort_session
    s = ort_session(model)
    names = {i.name for i in s.get_inputs()}
    return s.run(None, {k: v for k, v in feeds.items() if k in names})


def _rel_l2(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("inf")
    x = np.concatenate([np.asarray(v, np.float64).ravel() for v in a])
    y = np.concatenate([np.asarray(v, np.float64).ravel() for v in b])
    if not (np.isfinite(x) == np.isfinite(y)).all():
        return float("inf")
    f = np.isfinite(x)
    n = np.linalg.norm(x[f])
    d = np.linalg.norm(x[f] - y[f])
    return float(d / n) if n > 0 else (0.0 if d == 0 else float("inf"))


def _line(e: BaseException) -> str:
    from fpdiff.core.errors import plain
    text = " ".join(plain(str(e)).split())[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
