"""The float64 judge is code too: every run checks it against an independent fp32 implementation, and a cell
is never called `mismatch` on the word of a judge that check found suspect."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding, Judgement
from fpdiff.core.judge_status import AGREES, FAILED, OVERRULED, SAME_CODE, SUSPECT, UNCHECKED, UPHELD, JudgeStatus
from fpdiff.core.status import Status
from fpdiff.judging.grid import CellKey, Grid
from fpdiff.runtime import external
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import JobResult

# A witness that is not in the grid is run for the cross-check when the graph has at most this many nodes: one fp32
# compile and run, of the order of one grid cell for a graph this size; beyond it the message names the backends
# to add with --backends instead.
WITNESS_MAX_NODES = 2000
# The independent fp32 implementation of each model kind is the backend declaring it in `cross_checks`
# (backends.cross_check_for). Torch models have none: eager fp32 against eager float64 is the same graph run by the
# same kernels in two dtypes; it says whether fp32 holds, not whether the judge is right, so a torch judge is never
# suspected.

# the steps that write the judge's status (its revisions say which)
CROSS_CHECK, WITNESSES, EVIDENCE = "cross-check", "witnesses", "evidence"


@dataclass
class JudgeCheck:
    implementation: str
    cross_check: str | None = None
    status: JudgeStatus = UNCHECKED
    message: str = ""
    rel_l2: float | None = None  # the independent fp32 run against the float64 judge
    own_fp32_rel_l2: float | None = None  # the judge's own fp32 run against its float64 run
    first_divergence: dict | None = None
    witnesses: list[dict] = field(default_factory=list)  # each independent fp32 run asked, against the judge
    majority: list[str] = field(default_factory=list)  # OVERRULED: the witnesses whose reading the cells are judged by
    repro: str | None = None  # OVERRULED: where the op the judge gets wrong is written as a one-node graph
    stand_in: CellKey | None = field(default=None, repr=False)  # results key of the independent run
    reading: list | None = field(default=None, repr=False)  # OVERRULED: the majority's outputs (elementwise median)
    spread: compare.Metrics | None = field(default=None, repr=False)  # OVERRULED: the worst witness vs the reading
    failed_op: str | None = None  # FAILED: the op type the reference evaluator raised on, when it says
    # each step that changed the judge's status after it was made: {"step", "from", "to", "why"} (its provenance)
    revisions: list[dict] = field(default_factory=list)

    def revise(self, step: str, status: JudgeStatus, why: str) -> None:
        """The one place the judge's status is written after it is made, so its verdict says which steps made it."""
        status = JudgeStatus(status)
        if status != self.status:
            self.revisions.append({"step": step, "from": str(self.status), "to": str(status), "why": why})
        self.status = status

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k not in ("stand_in", "reading", "spread")}
        for k in ("rel_l2", "own_fp32_rel_l2"):
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = "inf"
        return d


def _measure(ref, r, p: prec.Precision) -> compare.Metrics | None:
    if r is None or r.status != Status.OK or len(r.outputs) != len(ref) or any(
            a.shape != b.shape for a, b in zip(r.outputs, ref)):
        return None
    return compare.measure(ref, r.outputs, p.compute)


def cross_check(grid: Grid, results: dict, ref_out, *, env: dict, timeout: float) -> JudgeCheck:
    """Is the judge trustworthy on this model? The mismatch rule applied to an independent fp32 implementation,
    with the judge's own fp32 run as its baseline: disagreement beyond it means one of the two is wrong. The marked
    runs that find where a suspect judge first parts run in workers under `env`, each within `timeout`."""
    source, judge_backend, key = grid.source, grid.judge_backend, grid.cross_check
    fp32 = grid.judge_fp32.precision
    own = _measure(ref_out, results.get(grid.judge_fp32), fp32)
    name = {"torch": "torch eager float64", "onnx": "ONNX reference evaluator float64"}.get(source.ref.kind,
                                                                                           judge_backend)
    if key is None:
        own_err = own.rel_l2 if own else None
        return JudgeCheck(name, "torch eager fp32", SAME_CODE,
                          "eager fp32 and float64 are the same graph and kernels in two dtypes: "
                          f"fp32 departs by {own_err:.2e}" if own_err is not None else "eager fp32 did not run",
                          None, own_err)
    other = key.backend
    r = results.get(key)
    check = JudgeCheck(name, f"{other} fp32", own_fp32_rel_l2=own.rel_l2 if own else None)
    if r is None or r.status != Status.OK:
        check.message = f"{other} fp32 could not run ({r.message if r else 'not run'}): the judge is unchecked"
        return check
    m = _measure(ref_out, r, fp32)
    if m is None:
        check.revise(CROSS_CHECK, SUSPECT, f"{other} fp32 returns outputs of other shapes")
        check.stand_in = key
        check.message = (f"{other} fp32 returns outputs of other shapes than the judge "
                         f"({[list(a.shape) for a in r.outputs]} vs {[list(a.shape) for a in ref_out]})")
        return check
    check.rel_l2 = m.rel_l2
    j = compare.judge(m, fp32, own)
    if j.status != Status.MISMATCH:
        check.revise(CROSS_CHECK, AGREES, f"{other} fp32 within its baseline of the judge")
        check.message = f"{other} fp32 agrees with the judge (rel L2 {m.rel_l2:.2e})"
        return check
    from fpdiff.judging.conditioning import relative_only
    bounded = relative_only(source, ref_out, r.outputs, fp32.tolerance, fp32.name)
    if bounded is not None:  # a wrong judge op errs on the values' scale, not only relative to tiny ones
        check.revise(CROSS_CHECK, AGREES, f"{other} fp32 departs only relative to tiny values of bounded outputs")
        check.message = (f"{other} fp32 agrees with the judge on the outputs' range and departs only relative to tiny "
                         f"values of bounded outputs (rel L2 {m.rel_l2:.2e}: {bounded.message})")
        return check
    check.revise(CROSS_CHECK, SUSPECT, f"{other} fp32 and the judge disagree beyond the baseline ({j.reason})")
    check.stand_in = key
    check.message = (f"{other} fp32 and the float64 judge disagree ({j.reason}); one of them is wrong, so no cell "
                     "is called mismatch unless it also departs from " + f"{other} fp32")
    with external.pool(env) as pool:
        check.first_divergence = _first_divergence(grid, lambda j: pool.run(j, timeout), key)
    if check.first_divergence:
        fd = check.first_divergence
        check.message += f"; they first part at {fd['op']} node {fd['node']!r} (tensor {fd['tensor']!r})"
    return check


def _first_divergence(grid: Grid, run: Callable[[Job], JobResult], key: CellKey) -> dict | None:
    """The first tensor where the independent fp32 run (`key`) leaves the float64 judge, both with every tensor
    marked in one run (the backends' prepare_marked, in a worker), the judge's fp32 run the baseline. The suspect
    verdict stands without it when a run fails (a refusal, a crash: the job's status); fpdiff's own errors raise."""
    import onnx

    from fpdiff.judging import markall
    source, judge_backend = grid.source, grid.judge_backend
    v64, r64 = markall.marked(run, grid.job(grid.key(judge_backend, "cpu", prec.FP64, key.variant)))
    got, r = markall.marked(run, grid.job(key)) if r64.status == Status.OK else ({}, r64)
    if r.status != Status.OK:
        return None
    base, _ = markall.marked(run, grid.job(grid.key(judge_backend, "cpu", key.precision, key.variant)))
    own = onnx.load(source.ref.original) if source.ref.original else None
    found = markall.verdicts(key.backend, got, v64, base, key.precision, markall.producers(source.module, own))
    first = found.first_departure
    return {"tensor": first.tensor, "node": first.node, "op": first.op, "rel_l2": first.rel_l2} if first else None


def hold_unconfirmed(check: JudgeCheck, cells: list, keys: list[CellKey],
                     rejudge: Callable[[CellKey], Judgement | None]) -> None:
    """With a suspect judge, a mismatch or precision-loss stands only when the cell reads the same against the
    independent run; otherwise (and for the independent run itself) the cell is `unjudged`, both readings given."""
    if check.status != SUSPECT:
        return
    for cell, key in zip(cells, keys):
        if cell.status not in (Status.MISMATCH, Status.PRECISION_LOSS):
            continue
        finding = Finding("judge-suspect", check.message,
                          remedy="check the judge: convert the model to the current opset (drop --keep-opset), or "
                          "compare with the model's own expected outputs")
        if key == check.stand_in:
            cell.revise("judge-suspect", Status.UNJUDGED,
                        f"{cell.reason}; this run is the independent implementation the judge disagrees with",
                        why="this run is the independent implementation the suspect judge disagrees with")
        else:
            j = rejudge(key)
            if j is not None and j.status == cell.status:
                cell.reason += f"; the same against {check.cross_check} ({j.reason})"
            else:
                got = j.status if j is not None else "not measurable"
                cell.revise("judge-suspect", Status.UNJUDGED,
                            f"{cell.status} against the suspect float64 judge ({cell.reason}), but {got} against "
                            f"{check.cross_check}", why=f"the judge is suspect and {check.cross_check} reads {got}")
        cell.findings.append(finding)


def _agree(a: list, b: list, fp32: prec.Precision, own: compare.Metrics | None) -> bool:
    """Two fp32 readings agree when one, taken as reference, passes the other by the mismatch rule (the judge's own
    fp32 error is the size of fp32 rounding on this model, whatever the judge's semantics)."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return False
    return compare.judge(compare.measure(a, b, fp32.compute), fp32, own).status != Status.MISMATCH


def _within_tolerance(a: list, b: list, fp32: prec.Precision) -> bool:
    """Two fp32 readings agree within fp32's tolerance (no judge's own fp32 error to size rounding by)."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return False
    return compare.judge(compare.measure(a, b, fp32.compute), fp32, None).status == Status.PASS


def _largest_agreeing(readings: dict, fp32: prec.Precision, own: compare.Metrics | None,
                      agree: Callable[[list, list], bool] | None = None) -> list:
    """The largest group of readings that agree pairwise (a handful of witnesses: greedy from each one)."""
    agree = agree or (lambda a, b: _agree(a, b, fp32, own))
    best: list = []
    for start in readings:
        group = [start]
        for k in readings:
            if k not in group and all(agree(readings[g], readings[k]) for g in group):
                group.append(k)
        best = group if len(group) > len(best) else best
    return best


def median_reading(outputs: list[list]) -> list:
    """The majority's reading: the elementwise median of float outputs (the mean of two), the first witness's
    integer outputs."""
    first = outputs[0]
    return [np.median(np.stack([np.asarray(o[i], dtype=np.float64) for o in outputs]), axis=0)
            if not compare.is_discrete(first[i]) else np.asarray(first[i]) for i in range(len(first))]


def ask_witnesses(check: JudgeCheck, results: dict, ref_out, judge_fp32_key: CellKey, witness_keys: list[CellKey],
                  fp32: prec.Precision, not_asked: list[str] = ()) -> None:
    """A suspect judge against more independent implementations at fp32: OVERRULED, UPHELD or still SUSPECT (see
    OVERRULED). `not_asked`: independent backends that could have been asked and were not (said in the message)."""
    if check.status != SUSPECT:
        return
    own = _measure(ref_out, results.get(judge_fp32_key), fp32)
    readings, with_judge = {}, []
    for key in witness_keys:
        r = results.get(key)
        m = _measure(ref_out, r, fp32)
        w = {"backend": key.backend, "status": r.status if r is not None else "not run"}
        if r is not None and r.status == Status.OK:
            w["agrees_with_judge"] = m is not None and compare.judge(m, fp32, own).status != Status.MISMATCH
            w["rel_l2"] = compare.json_float(m.rel_l2) if m is not None else "output shapes differ"
            readings[key] = r.outputs
            with_judge += [key] * w["agrees_with_judge"]
        else:
            w["message"] = (r.message if r is not None else "not run")[:300]
        check.witnesses.append(w)
    against = {k: v for k, v in readings.items() if k not in with_judge}
    group = _largest_agreeing(against, fp32, own)
    names = lambda keys: ", ".join(f"{k.backend} fp32" for k in keys) or "none"  # noqa: E731
    tally = f"with the judge: {names(with_judge)}; against it: {names(list(against))}"
    if len(group) >= 2 and len(group) > 1 + len(with_judge):
        check.revise(WITNESSES, OVERRULED, f"{names(group)} agree with each other and not with the judge")
        check.majority = [k.backend for k in group]
        check.reading = median_reading([readings[k] for k in group])
        check.spread = max((compare.measure(check.reading, readings[k], fp32.compute) for k in group),
                           key=lambda m: m.rel_l2)
        check.message = (f"the float64 judge is overruled: {names(group)} agree with each other and not with it "
                         f"({tally}); cells are judged against their reading (judged-by-majority)")
    elif len(with_judge) >= 2 and len(with_judge) > len(group):
        check.revise(WITNESSES, UPHELD, f"{names(with_judge)} agree with the judge")
        check.message = (f"the judge is upheld: {names(with_judge)} agree with it where {check.cross_check} does "
                         f"not ({tally}); {check.cross_check} is the odd one out")
    else:
        more = f"; add --backends {','.join(not_asked)} to ask more" if not_asked else ""
        check.message += f" (witnesses {tally}: no majority{more})"
    fd = check.first_divergence
    if fd and check.status != SUSPECT:
        check.message += f"; {check.cross_check} first parts from the judge at {fd['op']} node {fd['node']!r}"


def stand_in_majority(check: JudgeCheck, results: dict, witness_keys: list[CellKey], fp32: prec.Precision,
                      not_asked: list[str] = ()) -> None:
    """A failed judge: the independent fp32 runs that agree with each other (at least two) stand in for it, their
    reading the cells' reference; without such a pair nothing stands in and check.reading stays None."""
    readings = {}
    for key in witness_keys:
        r = results.get(key)
        w = {"backend": key.backend, "status": r.status if r is not None else "not run"}
        if r is not None and r.status == Status.OK:
            readings[key] = r.outputs
        else:
            w["message"] = (r.message if r is not None else "not run")[:300]
        check.witnesses.append(w)
    group = _largest_agreeing(readings, fp32, None, lambda a, b: _within_tolerance(a, b, fp32))
    names = ", ".join(f"{k.backend} fp32" for k in group)
    if len(group) < 2:
        more = f"; add --backends {','.join(not_asked)} to ask more" if not_asked else ""
        check.message += (f"; no two independent fp32 implementations agree to stand in for it "
                          f"({len(readings)} ran{more}): every cell that ran is unjudged")
        return
    check.majority = [k.backend for k in group]
    check.reading = median_reading([readings[k] for k in group])
    check.spread = max((compare.measure(check.reading, readings[k], fp32.compute) for k in group),
                       key=lambda m: m.rel_l2)
    check.message += f"; {names} agree with each other and stand in for it (judged-by-majority)"


# Evidence an overruled judge needs beyond the tally (witnesses that share the model's own fp32 rounding loss agree
# with each other and outvote a right judge): the op where they first part, fed the judge's own values, computes
# otherwise in the judge than in ONNX Runtime (the repro exits 1); or, where no repro can be made, the witnesses agree
# with each other at least this many times more closely than the judge's own fp32 run agrees with its float64 run.
CLOSER = 100.0


def require_evidence(check: JudgeCheck, repro_rc: int | None) -> None:
    """An OVERRULED tally stands only on evidence that a judge op is wrong (CLOSER). The repro exiting 0 upholds the
    judge (its op is right: the parting is accumulated fp32 rounding); no evidence either way leaves it SUSPECT."""
    if check.status != OVERRULED:
        return
    if repro_rc == 1:
        check.message += "; the one-node repro reproduces it (the judge's op itself computes otherwise)"
        return
    own, spread = check.own_fp32_rel_l2, check.spread.rel_l2 if check.spread is not None else None
    if repro_rc is None and own is not None and spread is not None and spread * CLOSER <= own:
        check.message += (f"; no one-node repro could be made, but the witnesses agree with each other ({spread:.1e}) "
                          f"far more closely than the judge's own fp32 run agrees with its float64 ({own:.1e})")
        return
    fd = check.first_divergence or {}
    where = f"{fd.get('op')} node {fd.get('node')!r}" if fd else "the op where they part"
    if repro_rc == 0:
        check.revise(EVIDENCE, UPHELD, f"the one-node repro of {where} exits 0: the judge's op computes as ORT's")
        names = ", ".join(f"{b} fp32" for b in check.majority)
        check.message = (f"the judge is upheld: {names} agree with each other and not with it, but {where}, fed the "
                         "judge's own values, computes the same in the judge and ONNX Runtime (the one-node repro "
                         "exits 0): the parting is fp32 rounding the witnesses share, not a wrong judge op")
    else:
        check.revise(EVIDENCE, SUSPECT, "no one-node repro could be run and the witnesses are not far closer")
        check.message += ("; but nothing shows a judge op wrong (no one-node repro could be run), so the judge is not "
                          "overruled: it stays suspect")
    check.majority, check.reading, check.spread, check.repro = [], None, None, None


def judge_by_majority(check: JudgeCheck, cells: list, keys: list[CellKey],
                      rejudge: Callable[[CellKey], Judgement | None]) -> None:
    """With an overruled judge (or a failed one a majority stands in for), every cell that ran is judged again
    against the majority's reading, and marked."""
    if check.status not in (OVERRULED, FAILED) or check.reading is None:
        return
    for cell, key in zip(cells, keys):
        if cell.status not in (Status.PASS, Status.PRECISION_LOSS, Status.MISMATCH):
            continue
        j = rejudge(key)
        was = (f"{cell.status} against the overruled float64 judge" if check.status == OVERRULED else
               "the float64 judge failed")
        if j is None:
            cell.revise("judge-majority", Status.UNJUDGED, f"{was}; not measurable against the majority's fp32 "
                        "reading (a precision finer than fp32, or other output shapes)")
        else:
            cell.revise("judge-majority", j.status, f"{j.reason} (against {', '.join(check.majority)} fp32; {was})",
                        why=f"against the majority's fp32 reading ({', '.join(check.majority)}): {j.reason}")
            cell.findings += j.findings
        cell.findings.append(Finding("judged-by-majority", check.message, remedy=(
            "report the judge's error upstream (the repro in judge.repro); the verdicts here rest on the agreeing "
            "independent implementations" if check.status == OVERRULED else "the verdicts here rest on the agreeing "
            "independent implementations (fp32 readings: a cell finer than fp32 is unjudged); the judge's failure and "
            "its repro are in judge.message and judge.repro")))


def unjudged_without_judge(check: JudgeCheck, cells: list) -> None:
    """A failed judge nothing stands in for: every cell that ran says so instead of a verdict."""
    if check.status != FAILED or check.reading is not None:
        return
    for cell in cells:
        if cell.status in (Status.PASS, Status.PRECISION_LOSS, Status.MISMATCH, Status.UNJUDGED):
            cell.revise("judge-failed", Status.UNJUDGED, f"no float64 reference to judge against: {check.message}")
            cell.findings.append(Finding("judge-failed", check.message, op=check.failed_op,
                                         remedy="report the judge's error upstream (the repro in judge.repro); "
                                         "add independent backends (ort, openvino) so a majority can stand in"))


REPRO_SCRIPT = '''"""{op} (opset {opset}): the ONNX reference evaluator and ONNX Runtime disagree on this one node,
at float32. Found by fpdiff check on {model}: {majority} agree with each other and not with the reference evaluator.
Exits 1 while they disagree (relative L2 over 1e-4)."""
import os
import pathlib
import sys

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

try:
    import onnxruntime as ort
except ImportError:
    print("onnxruntime is not installed: nothing to compare the evaluator with")
    sys.exit(3)
here = pathlib.Path(__file__).parent
model = onnx.load(str(here / "op.onnx"))
feeds = dict(np.load(here / "inputs.npz"))
new_ops = []
if os.environ.get("FPDIFF_JUDGE_KERNELS"):  # fpdiff's own run: the judge's kernels, as the judge ran the op
    from fpdiff.onnxtools.graph import float64_ops
    new_ops = float64_ops()
evaluator = ReferenceEvaluator(model, new_ops=new_ops).run(None, feeds)
runtime = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
worst = 0.0
for out, a, b in zip(model.graph.output, evaluator, runtime):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    rel = float(np.linalg.norm((a - b).ravel()) / max(np.linalg.norm(b.ravel()), 1e-300)) if a.shape == b.shape \\
        else float("inf")
    worst = max(worst, rel)
    print(f"{{out.name}}: reference evaluator {{list(a.shape)}} vs onnxruntime {{list(b.shape)}}, "
          f"relative L2 {{rel:.3g}}")
sys.exit(1 if worst > 1e-4 else 0)
'''


def write_repro(source, check: JudgeCheck, out_dir: str) -> None:
    """The op where the judge parts from the majority, as a one-node float32 graph with its inputs (the judge's own
    values just before it, where all readings still agree), both implementations' outputs and a script that exits
    1 while they disagree: a report for the reference evaluator's maintainers. Sets check.repro."""
    import onnx
    from onnx import helper

    from fpdiff.onnxtools.graph import float64_values
    fd = check.first_divergence
    model = source.module
    node = next((n for n in model.graph.node if fd and fd["tensor"] in n.output), None)
    if node is None or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return
    values = float64_values(model, dict(zip(source.input_names, [np.asarray(x) for x in source.inputs])))
    names = [i for i in node.input if i]
    if any(i not in values for i in names):
        return
    feeds = {i: np.asarray(values[i]).astype(np.float32) if np.asarray(values[i]).dtype.kind == "f"
             else np.asarray(values[i]) for i in names}
    one = helper.make_model(helper.make_graph(
        [node], f"judge_repro_{node.op_type}",
        [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for i, a in feeds.items()],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in node.output if o]),
        opset_imports=list(model.opset_import), ir_version=model.ir_version)
    stem = Path(source.ref.label).stem
    out = Path(out_dir) / f"judge-repro-{_safe(stem)}-{node.op_type}-{_safe(node.name or fd['tensor'])}"
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(one, str(out / "op.onnx"))
    np.savez(out / "inputs.npz", **feeds)
    for o in node.output:
        if o in values:
            np.save(out / f"judge_float64_{_safe(o)}.npy", np.asarray(values[o]))
    opset = next((x.version for x in model.opset_import if x.domain in ("", "ai.onnx")), "?")
    (out / "repro.py").write_text(REPRO_SCRIPT.format(op=node.op_type, opset=opset, model=source.ref.label,
                                                      majority=", ".join(f"{b} fp32" for b in check.majority)))
    check.repro = str(out / "repro.py")
    check.message += f"; repro: python {check.repro}"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60] or "node"


FAILED_REPRO_SCRIPT = '''"""{op} (opset {opset}): the ONNX reference evaluator fails on this one node.
Found by fpdiff check on {model}: {message}.
Exits 1 while the evaluator raises (or disagrees with ONNX Runtime), 0 once it runs and agrees."""
import pathlib
import sys
import traceback

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

here = pathlib.Path(__file__).parent
model = onnx.load(str(here / "op.onnx"))
feeds = dict(np.load(here / "inputs.npz"))
try:
    evaluator = ReferenceEvaluator(model).run(None, feeds)
except Exception:
    traceback.print_exc()
    sys.exit(1)
try:
    import onnxruntime as ort
except ImportError:
    print("the evaluator ran; onnxruntime is not installed to compare with")
    sys.exit(0)
runtime = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
for a, b in zip(evaluator, runtime):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not np.allclose(a, b, rtol=1e-4, atol=1e-6):
        print(f"reference evaluator {{list(a.shape)}} vs onnxruntime {{list(b.shape)}} differ")
        sys.exit(1)
print("the evaluator runs this node and agrees with onnxruntime")
'''


def failed_node(model, op: str | None, message: str, info: dict | None = None):
    """The node the judge failed at: the one the evaluator recorded (its outputs, in the job's info), else named in
    its message (node 'NAME'), else the first node of that op type."""
    import re

    from fpdiff.onnxtools.evaluator import FAILED_NODE
    at = (info or {}).get(FAILED_NODE) or {}
    outputs = list(at.get("outputs") or [])
    recorded = next((n for n in model.graph.node if outputs and list(n.output)[:len(outputs)] == outputs), None)
    if recorded is not None:
        return recorded
    op = op or at.get("op_type")
    named = re.search(r"node '([^']*)'", message)
    typed = re.search(r"Node type '(\w+)'", message)  # the evaluator's own words for an op it has no kernel for
    op = op or (typed.group(1) if typed else None)
    nodes = list(model.graph.node)
    return next((n for n in nodes if named and n.name == named.group(1)), None) or next(
        (n for n in nodes if op and n.op_type == op), None)


def write_failed_repro(source, check: JudgeCheck, ref, out_dir: str) -> None:
    """The node the judge failed at, as a one-node float32 graph fed the judge's own values up to it (the graph
    before it, evaluated in float64), with a script that exits 1 while the evaluator fails on it. Sets check.repro;
    the verdicts stand without it."""
    import onnx
    from onnx import helper

    from fpdiff.onnxtools.graph import float64_values
    model = source.module
    node = failed_node(model, ref.op, ref.message, ref.info)
    if node is None or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return
    try:
        before = onnx.ModelProto()
        before.CopyFrom(model)
        cut = list(model.graph.node).index(node)
        del before.graph.node[cut:]
        feeds = dict(zip(source.input_names, [np.asarray(x) for x in source.inputs]))
        values = {**float64_values(before, feeds), **feeds,
                  **{t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}}
        names = [i for i in node.input if i]
        inputs = {i: np.asarray(values[i]).astype(np.float32) if np.asarray(values[i]).dtype.kind == "f"
                  else np.asarray(values[i]) for i in names}
        one = helper.make_model(helper.make_graph(
            [node], f"judge_failed_{node.op_type}",
            [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
             for i, a in inputs.items()],
            [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in node.output if o]),
            opset_imports=list(model.opset_import), ir_version=model.ir_version)
        out = Path(out_dir) / f"judge-failed-{_safe(Path(source.ref.label).stem)}-{node.op_type}-{_safe(node.name)}"
        out.mkdir(parents=True, exist_ok=True)
        onnx.save(one, str(out / "op.onnx"))
        np.savez(out / "inputs.npz", **inputs)
    except Exception as e:  # noqa: BLE001 - the verdicts stand without the repro; the report says why it is missing
        check.message += f"; the repro could not be written ({type(e).__name__}: {str(e)[:200]})"
        return
    opset = next((x.version for x in model.opset_import if x.domain in ("", "ai.onnx")), "?")
    (out / "repro.py").write_text(FAILED_REPRO_SCRIPT.format(op=node.op_type, opset=opset, model=source.ref.label,
                                                             message=ref.message[:300].replace('"', "'")))
    check.failed_op = check.failed_op or node.op_type
    check.repro = str(out / "repro.py")
    check.message += f"; repro: python {check.repro}"
