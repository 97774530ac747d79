"""The float64 judge is code too: every run checks it against an independent fp32 implementation, and a cell
is never called `mismatch` on the word of a judge that check found suspect."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding, Judgement

AGREES, SUSPECT, UNCHECKED, SAME_CODE = "agrees", "suspect", "unchecked", "same-code"
# ONNX models: ONNX Runtime is the independent implementation (its own kernel for every op, its own reading of
# each opset). Torch models: eager fp32 against eager float64 is the same graph run by the same kernels in two
# dtypes; it says whether fp32 holds, not whether the judge is right, so a torch judge is never suspected.
INDEPENDENT = {"onnx": "ort"}


@dataclass
class JudgeCheck:
    implementation: str
    cross_check: str | None = None
    status: str = UNCHECKED
    message: str = ""
    rel_l2: float | None = None  # the independent fp32 run against the float64 judge
    own_fp32_rel_l2: float | None = None  # the judge's own fp32 run against its float64 run
    first_divergence: dict | None = None
    stand_in: tuple | None = field(default=None, repr=False)  # results key of the independent run

    def as_dict(self) -> dict:
        d = {k: v for k, v in self.__dict__.items() if k != "stand_in"}
        for k in ("rel_l2", "own_fp32_rel_l2"):
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = "inf"
        return d


def cross_check_jobs(kind: str, judge_backend: str, fp32: prec.Precision, variant) -> list[tuple]:
    """The extra jobs the cross-check needs: the judge's own fp32 run, and the independent one."""
    jobs = [(judge_backend, "cpu", fp32, variant)]
    if kind in INDEPENDENT:
        jobs.append((INDEPENDENT[kind], "cpu", fp32, variant))
    return jobs


def _measure(ref, r, p: prec.Precision) -> compare.Metrics | None:
    if r is None or r.status != "ok" or len(r.outputs) != len(ref) or any(
            a.shape != b.shape for a, b in zip(r.outputs, ref)):
        return None
    return compare.measure(ref, r.outputs, p.compute)


def cross_check(source, results: dict, ref_out, judge_backend: str, fp32: prec.Precision, variant) -> JudgeCheck:
    """Is the judge trustworthy on this model? The mismatch rule applied to an independent fp32 implementation,
    with the judge's own fp32 run as its baseline: disagreement beyond it means one of the two is wrong."""
    kind = source.ref.kind
    own = _measure(ref_out, results.get((judge_backend, "cpu", fp32.name, variant)), fp32)
    name = {"torch": "torch eager float64", "onnx": "ONNX reference evaluator float64"}.get(kind, judge_backend)
    if kind not in INDEPENDENT:
        own_err = own.rel_l2 if own else None
        return JudgeCheck(name, "torch eager fp32", SAME_CODE,
                          "eager fp32 and float64 are the same graph and kernels in two dtypes: "
                          f"fp32 departs by {own_err:.2e}" if own_err is not None else "eager fp32 did not run",
                          None, own_err)
    other = INDEPENDENT[kind]
    key = (other, "cpu", fp32.name, variant)
    r = results.get(key)
    check = JudgeCheck(name, f"{other} fp32", own_fp32_rel_l2=own.rel_l2 if own else None)
    if r is None or r.status != "ok":
        check.message = f"{other} fp32 could not run ({r.message if r else 'not run'}): the judge is unchecked"
        return check
    m = _measure(ref_out, r, fp32)
    if m is None:
        check.status, check.stand_in = SUSPECT, key
        check.message = (f"{other} fp32 returns outputs of other shapes than the judge "
                         f"({[list(a.shape) for a in r.outputs]} vs {[list(a.shape) for a in ref_out]})")
        return check
    check.rel_l2 = m.rel_l2
    j = compare.judge(m, fp32, own)
    if j.status != compare.MISMATCH:
        check.status = AGREES
        check.message = f"{other} fp32 agrees with the judge (rel L2 {m.rel_l2:.2e})"
        return check
    check.status, check.stand_in = SUSPECT, key
    check.message = (f"{other} fp32 and the float64 judge disagree ({j.reason}); one of them is wrong, so no cell "
                     "is called mismatch unless it also departs from " + f"{other} fp32")
    check.first_divergence = _first_divergence(source, fp32)
    if check.first_divergence:
        fd = check.first_divergence
        check.message += f"; they first part at {fd['op']} node {fd['node']!r} (tensor {fd['tensor']!r})"
    return check


def _first_divergence(source, fp32: prec.Precision) -> dict | None:
    """The first tensor where ORT fp32 leaves the float64 evaluator, from one run with every tensor marked."""
    try:
        from fpdiff.analysis.locate.markall import mark_all
        feeds = dict(zip(source.input_names, source.inputs))
        found = mark_all(source.module, feeds, fp32).first_departure
    except Exception:  # a convenience: the suspect verdict stands without it
        return None
    return {"tensor": found.tensor, "node": found.node, "op": found.op, "rel_l2": found.rel_l2} if found else None


def hold_unconfirmed(check: JudgeCheck, cells: list, keys: list[tuple],
                     rejudge: Callable[[tuple], Judgement | None]) -> None:
    """With a suspect judge, a mismatch or precision-loss stands only when the cell reads the same against the
    independent run; otherwise (and for the independent run itself) the cell is `unjudged`, both readings given."""
    if check.status != SUSPECT:
        return
    for cell, key in zip(cells, keys):
        if cell.status not in (compare.MISMATCH, compare.PRECISION_LOSS):
            continue
        finding = Finding("judge-suspect", check.message,
                          remedy="check the judge: convert the model to the current opset (drop --keep-opset), or "
                          "compare with the model's own expected outputs")
        if key == check.stand_in:
            cell.status = compare.UNJUDGED
            cell.reason = f"{cell.reason}; this run is the independent implementation the judge disagrees with"
        else:
            j = rejudge(key)
            if j is not None and j.status == cell.status:
                cell.reason += f"; the same against {check.cross_check} ({j.reason})"
            else:
                got = j.status if j is not None else "not measurable"
                cell.reason = (f"{cell.status} against the suspect float64 judge ({cell.reason}), but {got} "
                               f"against {check.cross_check}")
                cell.status = compare.UNJUDGED
        cell.findings.append(finding)
