"""A standalone repro per failing op cell, rechecked in a fresh process, and a ready-to-file upstream report per
distinct bug. The bundle holds what the backend was handed in the cell (the one-op exported program or ONNX graph at
the cell's precision, rebuilt from the cell's job exactly as the worker built it), its exact inputs and the float64
expectation; its script uses the backend's own API and numpy (analysis/repro.py)."""
from __future__ import annotations

import dataclasses
import json
import platform
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.analysis import repro as bundle
from fpdiff.analysis.ops.case import ONNX_CATALOG, OpsCell
from fpdiff.core import precision as prec
from fpdiff.core.compare import l2
from fpdiff.core.status import Status
from fpdiff.judging.rejudge import ANOTHER_FUNCTION, BLAMED, BLAMED_AT
from fpdiff.onnxtools.export import DEPARTS

# the script's exit status -> whether the cell's verdict re-triggered (None: the script could not tell)
_RETRIGGERED = {bundle.REPRODUCED: True, bundle.NOT_REPRODUCED: False, bundle.RAISED_INSTEAD: False}
INLINE_LINES = 60  # a script up to this long goes into the report whole; of a longer one, the backend's part
SHOWN = bundle.SHOWN


def task_of(job: Any) -> Any:
    """The Task the worker built for this job: the same source, data, precision, variant, cache and flags."""
    from fpdiff.runtime.cache import Cache
    from fpdiff.runtime.task import LoadedSource, Task
    return Task(LoadedSource(job.source, job.data_path, job.seed), job.precision, job.device, job.variant,
                Cache(job.cache_dir), job.flags)


def artifact(task: Any, backend: Any) -> tuple[Any, list, list[str] | None]:
    """(program or ONNX ModelProto, inputs, input dtypes where the backend was fed others than the inputs' own) as
    the backend got them in the cell: the backend says (Backend.handed); the exporter's own repro gets the
    program."""
    if hasattr(backend, "handed"):
        return backend.handed(task)
    return task.program(), list(task.inputs()), None


def rule_for(cell: OpsCell) -> str:
    """The bundle's rule for a failing cell: its status, and flips for integer-valued outputs."""
    if cell.status == Status.CRASH:
        return bundle.CRASH
    if cell.status in (Status.ERROR, Status.UNSUPPORTED, Status.TIMEOUT):
        return bundle.RAISES
    return bundle.FLIPS if _flips_only(cell) else bundle.REL_L2


def _flips_only(cell: OpsCell) -> bool:
    """The cell's outputs are all integer-valued (judged by flips alone): its metrics count flips and no floats."""
    m = cell.metrics or {}
    return bool(m.get("discrete")) and not m.get("numel")


def provenance(cell: OpsCell) -> str:
    """Where the float64 expectation comes from (the cell's own record when the sweep gives one)."""
    if cell.info.get("expected_from"):
        return str(cell.info["expected_from"])
    if cell.catalog == ONNX_CATALOG:
        judge = ("the ONNX reference evaluator (onnx.reference) on the node with its inputs and weights in float64 "
                 "(fpdiff's float64 judge); the ONNX node test's own expected output is a second opinion on it")
    else:
        judge = ("torch eager on the op with every float input in float64 and every op promoted to float64 "
                 "(fpdiff's float64 judge)")
    return (f"{judge}. It is computed from the case's float64 inputs; the backend got them rounded to "
            f"{cell.precision} (`inputs.npz`), and the reference implementation at {cell.precision} (the baseline) "
            "shows what that rounding alone costs.")


@dataclass(frozen=True)
class Claim:
    """What a failing cell's bundle shows: the float64 expected outputs and the backend's (None when it did not
    answer), the reference implementation's metrics at the cell's precision (`baseline`), the rule with its
    threshold (`limit`: rel L2 for "rel-l2", a count of elements for "flips"; unused by "raises"/"crash"), and the
    versions the upstream report names."""
    expected: list[np.ndarray]
    observed: list[np.ndarray] | None
    baseline: dict | None
    rule: str
    limit: float
    versions: dict


def write(out: Path, job: Any, cell: OpsCell, claim: Claim) -> Path:
    """Write the bundle and its REPORT.md for one failing cell; returns the script's path."""
    from fpdiff.backends import registry
    expected, observed, baseline, rule, limit, versions = (claim.expected, claim.observed, claim.baseline, claim.rule,
                                                           claim.limit, claim.versions)
    if cell.status == Status.CRASH:  # the process dying is the failure: only a child process can show it
        rule = bundle.CRASH
    backend = registry(job.plugins).create(job.backend)
    if str(cell.component or "").startswith("torch.onnx"):  # the exporter failed: the repro is the export
        info = cell.info or {}
        backend = TorchOnnx(departs=BLAMED in info,
                            torchscript="torchscript" in (info.get(BLAMED), info.get(DEPARTS)))
        if backend.departs:  # shown where the rule showed it: in float64 against the program, or at fp32
            at = prec.get(info.get(BLAMED_AT) or prec.FP64.name)  # the stored cell names it
            job, rule, limit = dataclasses.replace(job, precision=at), bundle.REL_L2, EXPORT_LIMITS[at]
    task = task_of(job)
    program, inputs, dtypes = artifact(task, backend)
    extra = {"op": cell.op, "catalog": cell.catalog, "case": cell.case, "variant": cell.variant,
             "shape_variant": cell.shape_variant, "status": str(cell.status), "description": cell.description,
             "expected_from": provenance(cell), "observed_error": cell.reason if rule in (bundle.RAISES,
                                                                                          bundle.CRASH) else None,
             "os": platform.platform()}
    kw = dict(title=title(cell), tool="ops", precision=job.precision, device=job.device, program=program,
              inputs=inputs, expected=expected, observed=observed, rule=rule, limit=limit, baseline=baseline,
              baseline_label="the reference implementation", flags=tuple(job.flags), versions=versions,
              input_dtypes=dtypes, extra=extra)
    script = bundle.write(out, bundle.Bundle(backend=backend, **kw))
    (out / "REPORT.md").write_text(upstream_report(cell, out, versions))
    return script


# the export check's own line between float32-held constants and another function (onnxtools/export.py)
EXPORT_LIMIT = 1e-5
# the line the exporter rule drew at each precision it shows a departure at: the export check's in float64, and at
# fp32 the departure no fp32 rounding reaches (rejudge.ANOTHER_FUNCTION)
EXPORT_LIMITS = {prec.FP64: EXPORT_LIMIT, prec.FP32: ANOTHER_FUNCTION}


class TorchOnnx:
    """The repro of a torch.onnx failure: the program exported as the cell's route exports it (dynamo, optimizer
    off; the TorchScript exporter where dynamo raised and the fallback's graph is the one that departs); where the
    exporter's graph computes another function, that graph run by ONNX's reference evaluator against the program's
    float64 answer (in float64, or at fp32 where the rule showed it there); where the export raises, the export
    alone."""
    name = "torch.onnx"

    def __init__(self, departs: bool, torchscript: bool = False) -> None:
        self.departs, self.torchscript = departs, torchscript

    def repro(self, r: Any) -> str:
        from fpdiff.backends.base import TORCH_INPUTS
        call = ("torch.onnx.export(program.module(), tuple(xt), path, dynamo=False, "
                "training=torch.onnx.TrainingMode.PRESERVE)" if self.torchscript else
                "torch.onnx.export(program, tuple(xt), path, dynamo=True, optimize=False)")
        export = TORCH_INPUTS + f"""path = str(here / "exported.onnx")
{call}
"""
        if not self.departs:
            return export + "outs = []\n"
        return export + """import onnx
from onnx.reference import ReferenceEvaluator
model = onnx.load(path)
inits = {t.name for t in model.graph.initializer}
names = [i.name for i in model.graph.input if i.name not in inits]
outs = ReferenceEvaluator(model).run(None, dict(zip(names, xs)))
"""


def recheck(scripts: list[Path], timeout: float = 120) -> dict[str, bool | None]:
    """Each script in a fresh interpreter, one at a time (the scripts compile and run backends: two at once would
    only share the same cores): True re-triggered, False did not, None the script broke (or ran out of time)."""
    out: dict[str, bool | None] = {}
    for script in scripts:
        try:
            done = subprocess.run([sys.executable, str(script)], cwd=Path(script).parent, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            out[str(script)] = None
            continue
        # a signal under a numeric or raising rule: the backend died where the cell had an answer, a different
        # failure (a crash cell's script catches its child's death itself and exits 1)
        out[str(script)] = False if done.returncode < 0 else _RETRIGGERED.get(done.returncode)
    return out


def signature(cell: OpsCell) -> str:
    """The distinct-bug key: one report per backend, precision, catalog op, status class and variant (the samples
    and shapes of one op under one variant failing the same way are one bug to report). Safe as a folder name."""
    parts = (culprit(cell), cell.precision, cell.catalog, cell.op, _status_class(cell), cell.variant)
    return "__".join(re.sub(r"[^A-Za-z0-9.+-]", "_", str(p)) for p in parts)


def culprit(cell: OpsCell) -> str:
    """Whose bug it is: the exporter that failed on the way to the backend, else the backend."""
    from fpdiff.core.errors import ONNX_EXPORT, QUANTIZE, TORCH_EXPORT
    if cell.status == Status.ERROR and cell.stage in (ONNX_EXPORT, TORCH_EXPORT, QUANTIZE) and cell.component:
        return str(cell.component).split()[0]
    return cell.backend


def _status_class(cell: OpsCell) -> str:
    if cell.status == Status.MISMATCH and _flips_only(cell):
        return "mismatch-flips"
    return str(cell.status)


def title(cell: OpsCell) -> str:
    """"[backend] op at precision: what goes wrong"."""
    what = {Status.MISMATCH: "wrong result", Status.ERROR: "fails", Status.CRASH: "crashes",
            Status.TIMEOUT: "hangs", Status.UNSUPPORTED: "is refused"}.get(Status(cell.status), str(cell.status))
    variant = f" ({cell.variant})" if cell.variant != "sample" else ""
    shape = f", {cell.shape_variant} shapes" if cell.shape_variant not in ("", "static") else ""
    route = f" (on the way to {cell.backend})" if culprit(cell) != cell.backend else ""
    return f"[{culprit(cell)}] {cell.op} at {cell.precision}{variant}{shape}{route}: {what}"


def _arrays(path: Path) -> list[np.ndarray] | None:
    if not path.exists():
        return None
    with np.load(path) as data:
        return [np.asarray(data[f"out{i}"], dtype=np.float64) for i in range(len(data.files))]


def numbers(observed: list[np.ndarray] | None, expected: list[np.ndarray]) -> list[str]:
    """Observed vs expected, as report lines: rel L2, max abs error, elements differing, the first ones."""
    if observed is None:
        return ["(no outputs: the backend did not return any)"]
    if [a.shape for a in observed] != [a.shape for a in expected]:
        return [f"output shapes {[a.shape for a in observed]}, expected {[a.shape for a in expected]}"]
    o = np.concatenate([a.ravel() for a in observed]) if observed else np.zeros(0)
    e = np.concatenate([a.ravel() for a in expected]) if expected else np.zeros(0)
    with np.errstate(all="ignore"):
        differs = (o != e) & ~(np.isnan(o) & np.isnan(e))
        bad = int((~np.isfinite(o) & np.isfinite(e)).sum())
        delta = np.where(differs, o - e, 0.0)
        finite = np.isfinite(delta)
        norm = l2(e[np.isfinite(e)])
        size = l2(delta[finite])
        rel = float("inf") if bad or (not norm and size) else size / norm if norm else 0.0
        max_abs = float(np.max(np.abs(delta[finite]))) if finite.any() else 0.0
    lines = [f"relative L2 vs float64: {rel:.3e} ({bad} non-finite where float64 is finite)",
             f"max abs error: {max_abs:.3e}", f"elements differing: {int(differs.sum())} of {o.size}"]
    lines += [f"element {i}: observed {float(o[i])!r}, expected {float(e[i])!r}"
              for i in np.flatnonzero(differs)[:SHOWN]]
    return lines


def upstream_report(cell: OpsCell, bundle_dir: Path, versions: dict) -> str:
    """A report ready to file upstream (markdown): title, versions, the repro, observed vs expected, the float64
    expectation's provenance."""
    bundle_dir = Path(bundle_dir)
    meta = json.loads((bundle_dir / "meta.json").read_text())
    script = (bundle_dir / "repro.py").read_text()
    versions_md = "\n".join(f"- {k}: {v}" for k, v in {**versions, "OS": meta.get("os", platform.platform())}.items()
                            if v)
    files = ", ".join(f"`{f}`" for f in meta["files"])
    about = cell.description or meta.get("description")
    parts = [f"# {title(cell)}", "", *([about, ""] if about else []), "## Versions", versions_md, "",
             "## Reproduce",
             f"The bundle holds {files} and `repro.py` (the {_artifact_words(meta)} and its exact inputs, as "
             f"{cell.backend} got them at {cell.precision}). Run `python repro.py` beside them: exit 1 means the "
             "problem reproduced, 0 that it did not.", ""]
    if len(script.splitlines()) <= INLINE_LINES:
        parts += ["```python", script.rstrip(), "```", ""]
    else:
        parts += [f"The backend's part of `repro.py` ({len(script.splitlines())} lines in all, attached; `xs`: the "
                  "arrays of `inputs.npz` in order, `meta`: `meta.json`):", "", "```python", _backend_part(script),
                  "```", ""]
    parts += ["## Observed vs expected"]
    if meta["rule"] in (bundle.RAISES, bundle.CRASH):
        parts += [f"{cell.backend} {'raises' if meta['rule'] == bundle.RAISES else 'dies'}: {cell.reason}", ""]
    else:
        lines = numbers(_arrays(bundle_dir / "backend_output.npz"), _arrays(bundle_dir / "expected.npz") or [])
        parts += [f"- {ln}" for ln in lines]
        base = meta.get("baseline") or {}
        if base:
            parts += [f"- {meta['baseline_label']} at {cell.precision}: "
                      + ", ".join(f"{k} {v:.3e}" if isinstance(v, float) else f"{k} {v}" for k, v in base.items())]
        parts += [f"- limit ({meta['rule']}): {meta['limit']:.3e}", ""]
    parts += ["## Where the expected values come from", provenance(cell), ""]
    return "\n".join(parts)


def _backend_part(script: str) -> str:
    """The lines of the script that call the backend (between the markers the bundle writer puts around them)."""
    start, end = "# --- the backend's part ---", "# --- end of the backend's part ---"
    if start not in script or end not in script:
        return script.rstrip()
    return script.split(start, 1)[1].split(end, 1)[0].strip()


def _artifact_words(meta: dict) -> str:
    if meta.get("artifact"):  # the bundle says what it holds (a quantized graph, not a one-op export)
        return str(meta["artifact"])
    graph = "ONNX graph (`segment.onnx`)" if "segment.onnx" in meta["files"] else "exported program (`segment.pt2`)"
    return f"one-op {graph}"
