"""What the op sweep adds to check's verdict on a cell: the flip rule for float outputs that hold integers (round,
floor, sign: one tie broken the other way is a flip, not an error of 0.5 in relative L2), the catalog's expected
output as a second opinion on the float64 judge, the runtime's support state, and each failing cell's repro."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np

from fpdiff.analysis.ops.case import Case, OpsCell
from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import CellKey, Grid
from fpdiff.judging.rejudge import CHECK_RULES
from fpdiff.judging.rules import Evidence, Rule, insert_after
from fpdiff.runtime.worker import JobResult

# Findings the float rule attaches to its verdict, which the flip rule replaces with its own
_FLOAT_RULE_FINDINGS = {"coarser-than-requested", "rounds-more", "no-baseline"}
# The catalog's expected outputs are numpy's float32 (sometimes float64) computations: they depart from the float64
# judge by float32 rounding through one op (about 1e-7), more for transcendental approximations; beyond 1e-4 in
# relative L2 one of the two computes another function (a wrong expected value, or a judge bug), which is reported.
EXPECTED_TOLERANCE = 1e-4


def integer_flips(ev: Evidence, cells: list[Cell]) -> None:
    """Cells of an integer-valued op judged by how many output elements flip against float64, next to how many the
    baseline at the same precision flips (compare.judge_flips), the other outputs by the float rule as before."""
    ints = ev.keep("integer-valued outputs",
                   lambda: [i for i, a in enumerate(ev.ref.outputs or []) if compare.holds_integers(a)])
    if not ints:
        return
    for cell, key in zip(cells, ev.grid.cells):
        if ev.results[key].status != Status.OK or cell.status not in (Status.PASS, Status.PRECISION_LOSS,
                                                                        Status.MISMATCH):
            continue
        m = ev.keep(f"flips {key}", lambda k=key: _flips(ev, k))
        if m is None:
            continue
        p = key.precision
        base = ev.grid.baselines[p.name]
        bm = ev.keep(f"flips {base}", lambda k=base: _flips(ev, k))
        j = compare.judge(m, p, bm)
        cell.revise(INTEGER_FLIPS, j.status, f"integer-valued outputs judged by flips: {j.reason}")
        cell.metrics, cell.baseline_metrics = m.as_dict(), bm.as_dict() if bm else None
        cell.effective_bits = None
        cell.findings = [f for f in cell.findings if f.kind not in _FLOAT_RULE_FINDINGS] + j.findings


def _flips(ev: Evidence, key: CellKey) -> compare.Metrics | None:
    """A job's outputs against float64 with the integer-valued ones as flips (compare.INTEGER_VALUED); None where it
    did not run or its outputs are shaped otherwise."""
    r, ref_out = ev.results.get(key), ev.ref.outputs
    if r is None or r.status != Status.OK or [a.shape for a in r.outputs] != [a.shape for a in ref_out]:
        return None
    return compare.measure(ref_out, r.outputs, key.precision.compute, compare.WITH_INTEGER_VALUED)


INTEGER_FLIPS = "integer-flips"
# the op sweep's rules: check's, with the flip rule for integer-valued ops right after the float rules (before the
# judge's and conditioning's, which then weigh a flip mismatch like any other)
OPS_RULES = insert_after(CHECK_RULES, "survives-precision", Rule(INTEGER_FLIPS, integer_flips))
# the rule lists a sweep judges by, by the name its stored evidence records (ops/stored.py judges again by it)
CHECK, OPS = "check", "ops"
RULES = {CHECK: CHECK_RULES, OPS: OPS_RULES}


def expected_disagreement(case: Case, ref_out: list[np.ndarray]) -> dict | None:
    """The catalog's expected output against the float64 judge's: None when they agree (or there is none). Any
    payload with an `expected` list gives one (a fuzz graph's torch float64 value next to its ONNX form's judge)."""
    expected = getattr(case.payload, "expected", None)
    if not expected:
        return None
    exp = [np.asarray(e) for e in expected]
    base = {"case": case.case_id, "op": case.op}
    if len(exp) != len(ref_out) or any(a.shape != b.shape for a, b in zip(exp, ref_out)):
        return {**base, "rel_l2": None, "detail": f"expected shapes {[list(a.shape) for a in exp]}, float64 judge "
                f"{[list(a.shape) for a in ref_out]}"}
    pairs = [(r, e) for r, e in zip(ref_out, exp) if np.asarray(e).dtype.kind in "fiub"]
    if not pairs:
        return None
    m = compare.measure([np.asarray(r) for r, _ in pairs], [e for _, e in pairs], prec.FP32.compute)
    if m.flips == 0 and m.nan == 0 and m.inf == 0 and m.rel_l2 <= EXPECTED_TOLERANCE:
        return None
    return {**base, "rel_l2": compare.json_float(m.rel_l2),
            "detail": f"rel L2 {m.rel_l2:.2e}, {m.flips} of {m.discrete} integer values differ, "
                      f"{m.nan + m.inf} non-finite where the judge is finite"}


def support(cell: Cell, r: JobResult) -> tuple[str | None, str]:
    """The runtime's own word on the op at the cell's dtype (support.py reads it)."""
    from fpdiff.analysis.ops.support import support_state
    return support_state(cell.status, cell.findings, r.support, cell.precision, cell.reason)


# seconds a repro's writing may take in its child: an export and a compile of one op, with room for a loaded machine
WRITE_TIMEOUT = 300.0


def repro_request(case: Case, grid: Grid, key: CellKey, cell: OpsCell, baseline: dict | None, r: JobResult,
                  ref: JobResult, root: Path) -> tuple:
    """What writing the cell's repro bundle needs (ops/repro.py's arguments), to be written with its batch's others
    by write_repros. `baseline`: the metrics of the reference implementation at the cell's precision."""
    from fpdiff.analysis.ops import repro
    rule, limit = repro_rule(cell, baseline, key.precision)
    return (root / repro.signature(cell) / repro_name(cell), grid.job(key), cell,
            repro.Claim(ref.outputs, r.outputs if r.status == Status.OK else None, baseline, rule, limit,
                        _versions(grid, cell.backend, r)))


def write_repros(requests: list[tuple], root: Path) -> None:
    """Each request's bundle written, its answer on its cell (`repro`: the script, or why there is none). Written in
    a child process, all of a batch in one: writing converts and compiles with the backend's own tools (OpenVINO's
    converter in-process), and one that crashes or hangs there must cost its repro, not the sweep; after such a
    loss the rest are written one child each. The children's chatter goes to a log beside the repros."""
    if not requests:
        return
    root.mkdir(parents=True, exist_ok=True)
    lost = _write_in_child(requests, root)
    if lost:
        for one in requests:
            if not (one[0] / "written.json").exists():
                _write_in_child([one], root)
    for out, _, cell, claim in requests:
        cell.repro = _answer(out, claim.rule, claim.limit)


def _write_in_child(requests: list[tuple], root: Path) -> str | None:
    """Write the requests in one child process; None when it ended well, else how it ended."""
    with open(root / "repro-writing.log", "ab") as log:
        try:
            done = subprocess.run([sys.executable, "-c", "from fpdiff.analysis.ops.verdict import write_child; "
                                   "write_child()"], input=pickle.dumps(requests), stdout=log, stderr=log,
                                  timeout=WRITE_TIMEOUT * len(requests))
        except subprocess.TimeoutExpired:
            return f"writing took over {WRITE_TIMEOUT:g} s a repro"
    return f"the process writing it ended with {done.returncode}" if done.returncode else None


def _answer(out: Path, rule: str, limit: float) -> dict:
    """A cell's repro entry from what its child wrote (the rule the bundle tests, as its meta.json says)."""
    answer = out / "written.json"
    if not answer.exists():
        return {"path": None, "retriggers": None, "error": "the process writing it crashed or hung"}
    said = json.loads(answer.read_text())
    answer.unlink()
    if said.get("error"):  # the verdict stands without its repro; the report says why it is missing
        return {"path": None, "retriggers": None, "error": said["error"]}
    meta = json.loads((Path(said["path"]).parent / "meta.json").read_text())
    return {"path": said["path"], "retriggers": None, "rule": meta.get("rule", rule),
            "limit": meta.get("limit", limit)}


def _versions(grid: Grid, backend: str, r: JobResult) -> dict:
    """What an upstream report names: the worker's own versions when it runs elsewhere, else this stack's (torch,
    numpy, onnx and the backend's packages)."""
    remote = (r.info or {}).get("worker", {}).get("versions")
    if remote:
        return dict(remote)
    from fpdiff.core.versions import report_versions
    return report_versions(["onnx", *grid.reg.cls(backend).requires])


def write_child() -> None:
    """A child's side of write_repros: each bundle from the pickled requests on stdin, its path (or why not) in
    written.json next to it as soon as it is done."""
    from fpdiff.analysis.ops import repro
    for out, job, cell, claim in pickle.loads(sys.stdin.buffer.read()):
        out.mkdir(parents=True, exist_ok=True)
        try:
            said = {"path": str(repro.write(out, job, cell, claim))}
        except Exception as e:
            said = {"error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
        (out / "written.json").write_text(json.dumps(said))


def repro_rule(cell: OpsCell, baseline: dict | None, p: prec.Precision) -> tuple[str, float]:
    """What the repro script tests, with the verdict's own limit: a failure raises; a mismatch exceeds the limit
    that made it one (compare._judge_floats: rel L2 over max(tolerance, factor x the baseline's), else the worst
    element over max(10 x tolerance, 16 x the baseline's); flips over compare.judge_flips' limit)."""
    if cell.status != Status.MISMATCH:
        return "raises", 0.0
    m, b = cell.metrics or {}, baseline or {}
    if m.get("discrete") and m.get("flips") and not m.get("numel"):
        return "flips", float(compare.FLIP_FACTOR * int(b.get("flips") or 0) + compare.FLIP_SLACK)
    factor = compare.BASELINE_FACTOR if int(m.get("numel") or 0) >= compare.SMALL_NUMEL \
        else compare.SMALL_BASELINE_FACTOR
    rel_limit = max(p.tolerance, factor * _num(b.get("rel_l2")))
    if _num(m.get("rel_l2"), float("inf")) > rel_limit or not b:
        return "rel-l2", float(rel_limit)
    return "max-norm", float(max(p.tolerance * 10, compare.MAX_FACTOR * _num(b.get("max_norm"))))


def _num(v, default: float = 0.0) -> float:
    """A metric from a cell's JSON ("inf" is written as text)."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def repro_name(cell: OpsCell) -> str:
    """A failing cell's bundle folder: its case, backend, precision and shape variant."""
    return f"{cell.case}-{cell.backend}-{cell.precision}-{cell.shape_variant}".replace("/", "_")[:150]


def recheck_repros(cells: list[OpsCell]) -> None:
    """Every written repro rerun in a fresh process: whether it re-triggers is recorded on its cell."""
    from fpdiff.analysis.ops import repro
    written = [c for c in cells if c.repro and c.repro.get("path")]
    if not written:
        return
    answers = repro.recheck([Path(c.repro["path"]) for c in written])
    for c in written:
        c.repro["retriggers"] = answers.get(c.repro["path"])


MIXED_ONLY = "mixed-dims"  # SEEDS.md #2's signature: right with every dim static and every dim dynamic, wrong in a mix
_WRONG = (Status.MISMATCH, Status.ERROR, Status.CRASH, Status.TIMEOUT)


def wrong_only_in_mixes(shapes: dict[str, str]) -> bool:
    """Whether one case's cells on one backend and precision, by shape variant ({static, dynamic, mixed:...} ->
    status), are right at both ends and wrong in some mix: the shape variants judged against each other."""
    ends = [shapes.get(v) for v in ("static", "dynamic")]
    mixes = [st for v, st in shapes.items() if v.startswith("mixed:")]
    return None not in ends and not any(st in _WRONG for st in ends) and any(st in _WRONG for st in mixes)
