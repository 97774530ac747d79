"""Old-opset ONNX graphs brought to the current opset before the judge sees them: old-opset semantics (Softmax's
2-D coercion before opset 13) are where reference evaluators and importers go wrong. The conversion is a stage
that can change numbers too, so it is checked (both graphs run by one witness) and dropped when the two disagree.
A graph to be cast to bfloat16 is brought to opset 22 the same way, where bfloat16 reaches Conv and its kin."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

# The opset sources are brought to: onnx 1.23's reference evaluator computes it as the spec says where it gets
# opset <= 12 Softmax wrong; ONNX Runtime 1.32 and IREE 3.13's importer read it.
TARGET_OPSET = 21
# The opset a bfloat16 cast of an ONNX source is made at: bfloat16 reaches Conv, LSTM, GRU, pooling and the norms
# only at opset 22, where torch's bfloat16 exports are made too (onnxtools/export.py's BF16_OPSET); ONNX Runtime
# 1.32, OpenVINO 2026.4 and IREE 3.13's importer read it (tests/sources/test_opset.py runs all three on one).
BF16_OPSET = 22
# The converted graph must reproduce the original within this relative L2 on the witness (same kernels, same
# order: the two agree to a few ulps of fp32 on ONNX Runtime, of fp64 on the reference evaluator; the fp32 check
# tolerance, 1e-5, would hide a real semantic change only if it were tiny).
AGREE = 1e-6
# Witnesses, in order. ONNX Runtime first: the reference evaluator misreads some old-opset semantics (Softmax's
# 2-D coercion before opset 13, opset-9 BatchNormalization), which is why graphs are converted at all. But ONNX
# Runtime has no kernels for opset < 7 (Add-6, Gemm-6, BatchNormalization-6...) and cannot load such a graph, so
# there the float64 reference evaluator, which runs every opset, checks the conversion.
ORT_WITNESS, REF_WITNESS = "onnxruntime fp32", "onnx reference evaluator float64"
ORT_TIMEOUT = 300.0  # seconds for ONNX Runtime to load and run both graphs, as for one check cell
REFUSED = 3  # the child's exit code when ONNX Runtime itself refused or failed on a graph


def default_opset(model) -> int:
    return max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)


def upgrade(model, feeds: dict[str, np.ndarray], out_dir: Path, stem: str):
    """(model to use, path to use or None, note): the converted model when it is checked, else the original."""
    import onnx

    if default_opset(model) >= TARGET_OPSET:
        return model, None, {"opset": default_opset(model)}
    new, note = convert(model, TARGET_OPSET, feeds)
    if new is None:
        return model, None, note
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}.opset{TARGET_OPSET}.onnx"
    onnx.save(new, str(path))
    return new, path, note


def for_bfloat16(model, feeds: dict[str, np.ndarray]):
    """(graph to cast to bfloat16, note): the model at BF16_OPSET, converted and checked like the judge's graph,
    so fpdiff's cast computes every op in bfloat16 (before opset 22 Conv, LSTM, pooling and the norms have no
    bfloat16 and the cast keeps them float32, which a backend's op count then calls dtype-changed); the model at
    its own opset when the conversion fails or departs, the note saying why, for the cell to go on with."""
    if default_opset(model) >= BF16_OPSET:
        return model, {"opset": default_opset(model)}
    new, note = convert(model, BF16_OPSET, feeds)
    return (model if new is None else new), note


def convert(model, target: int, feeds: dict[str, np.ndarray]):
    """(the model at opset `target`, note) when onnx's converter makes a valid graph that reproduces the original
    on a witness (within AGREE); (None, note with the reason) otherwise."""
    import onnx
    from onnx import version_converter

    note: dict = {"opset": default_opset(model), "converted_to": target}
    try:
        new = version_converter.convert_version(model, target)
        # the converter keeps the IR version (3 for the opset-9 zoo models, where every weight must also be a
        # graph input); the new opset needs the IR version that defines it, under which a graph cut out of the
        # model (locate's segments) may hold weights that are not inputs; onnx's table knows its own domains only
        # (a custom domain's opset raised "Unsupported opset-version" and kept every such graph unconverted)
        standard = [o for o in new.opset_import if o.domain in ("", "ai.onnx")]
        new.ir_version = max(new.ir_version, onnx.helper.find_min_ir_version_for(standard))
        onnx.checker.check_model(new)
    except Exception as e:
        note.update(status="kept original", reason=f"onnx.version_converter failed: {_line(e)}")
        return None, note
    outs, why = _witness(model, new, feeds)
    if outs is None:
        note.update(status="kept original", reason=f"the conversion could not be checked: {why}")
        return None, note
    err = _rel_l2(*outs)
    note.update(checked_on=why, check_rel_l2=err)
    if not err <= AGREE:
        note.update(status="kept original",
                    reason=f"the converted graph departs from the original on {why} (rel L2 {err:.2e})")
        return None, note
    note["status"] = "converted"
    return new, note


def _witness(old, new, feeds: dict[str, np.ndarray]) -> tuple[tuple | None, str]:
    """((outputs of old, outputs of new), the witness) from the first witness that runs both graphs, or
    (None, why none could)."""
    from fpdiff.core.errors import ReferenceFailed
    from fpdiff.onnxtools.graph import float64_values
    outs, why = _on_ort(old, new, feeds)
    if outs is not None:
        return outs, ORT_WITNESS
    failed = [f"{ORT_WITNESS}: {why}"]
    try:  # the evaluator's declared refusals (an op or type it has no kernel for) come as ReferenceFailed
        return tuple(float64_values(m, feeds, intermediate=False) for m in (old, new)), REF_WITNESS
    except ReferenceFailed as e:
        failed.append(f"{REF_WITNESS}: {_line(e)}")
    return None, "; ".join(failed)


def _on_ort(old, new, feeds: dict[str, np.ndarray]) -> tuple[tuple | None, str]:
    """Both graphs run by ONNX Runtime in a child interpreter (this module's __main__), so that a native crash costs
    the check, not the run; sources sit below the worker runtime, hence a child of their own. (None, why) when
    onnxruntime is not installed, refuses a graph, crashes or hangs; fpdiff's own errors in the child raise here."""
    import importlib.util
    import subprocess
    import tempfile

    import onnx
    if importlib.util.find_spec("onnxruntime") is None:
        return None, "onnxruntime is not installed (pip install 'fpdiff[ort]')"
    with tempfile.TemporaryDirectory(prefix="fpdiff-opset-") as tmp:
        d = Path(tmp)
        onnx.save(old, str(d / "old.onnx"))
        onnx.save(new, str(d / "new.onnx"))
        names = list(feeds)
        np.savez(d / "feeds.npz", **{f"in{i}": feeds[n] for i, n in enumerate(names)})
        (d / "names.txt").write_text("\n".join(names))
        try:
            done = subprocess.run([sys.executable, "-m", "fpdiff.sources.opset", str(d)], capture_output=True,
                                  text=True, timeout=ORT_TIMEOUT)
        except subprocess.TimeoutExpired:
            return None, f"no answer within {ORT_TIMEOUT:g} s"
        if done.returncode == REFUSED:
            return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "refused"
        if done.returncode < 0:
            return None, f"onnxruntime crashed (signal {-done.returncode})"
        if done.returncode != 0:
            raise RuntimeError(f"the opset conversion's check on onnxruntime failed in fpdiff's own code:\n"
                               f"{done.stderr}")
        with np.load(d / "outs.npz", allow_pickle=False) as z:
            return tuple([z[f"{which}{i}"] for i in range(int(z[f"{which}_count"]))] for which in ("old", "new")), ""


def _serve_ort(d: Path) -> None:
    """The child: both graphs on ONNX Runtime, their outputs to outs.npz; ONNX Runtime's own failure is said on
    stderr with exit code REFUSED, anything raised in fpdiff's code is a traceback (exit 1)."""
    from fpdiff.core.errors import raised_by_fpdiff
    from fpdiff.onnxtools.graph import ort_session
    names = (d / "names.txt").read_text().split("\n")
    with np.load(d / "feeds.npz", allow_pickle=False) as z:
        feeds = {n: z[f"in{i}"] for i, n in enumerate(names)}
    outs: dict[str, np.ndarray] = {}
    for which in ("old", "new"):
        try:
            session = ort_session(d / f"{which}.onnx")
            wanted = {i.name for i in session.get_inputs()}
            got = session.run(None, {k: v for k, v in feeds.items() if k in wanted})
        except Exception as e:
            if raised_by_fpdiff(e):
                raise
            print(f"{which} graph: {_line(e)}", file=sys.stderr)
            sys.exit(REFUSED)
        outs[f"{which}_count"] = np.asarray(len(got))
        outs.update({f"{which}{i}": np.asarray(a) for i, a in enumerate(got)})
    np.savez(d / "outs.npz", **outs)


def _rel_l2(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("inf")
    from fpdiff.core import compare
    return compare.rel_l2(np.concatenate([np.asarray(v, np.float64).ravel() for v in a]),
                          np.concatenate([np.asarray(v, np.float64).ravel() for v in b]))


def _line(e: BaseException) -> str:
    from fpdiff.core.errors import plain
    text = " ".join(plain(str(e)).split())[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


if __name__ == "__main__":
    _serve_ort(Path(sys.argv[1]))
