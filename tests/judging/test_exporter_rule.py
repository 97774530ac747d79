"""The exporter rule (judging/rejudge.py) where the float64 export check did not judge the cell's graph: the backend and
the ONNX reference evaluator agreeing on the fp32 graph while both depart from float64 charge the cell to torch.onnx;
a backend alone in departing, a departure rounding explains, or a float64 check that judged the graph keep the
mismatch. The jobs' results are given, so each case says exactly which evidence decides."""
from pathlib import Path

import numpy as np
import pytest

from fpdiff.backends import registry
from fpdiff.core import precision as prec
from fpdiff.core.errors import ONNX_EXPORT
from fpdiff.core.status import Status
from fpdiff.judging.grid import GridSettings, make_grid
from fpdiff.judging.judge import JudgeCheck
from fpdiff.judging.rejudge import (
    ANOTHER_FUNCTION,
    BLAMED,
    BLAMED_AT,
    EXPORTER,
    blame_exporter,
    judge_run,
)
from fpdiff.judging.rules import Evidence, Rule
from fpdiff.model.graph import STATIC
from fpdiff.onnxtools.export import DEPARTS
from fpdiff.runtime import rundir
from fpdiff.runtime.worker import JobResult

SPECS = Path(__file__).parents[1] / "specs"
RULES = (Rule(EXPORTER, blame_exporter),)
WANT = np.random.default_rng(0).standard_normal((1, 3, 9, 9))  # the float64 reference's answer
AGREES = {"onnx_export_check": "agrees with the torch program in float64 (rel L2 0.0e+00, within 1e-15)"}


def _ok(out: np.ndarray, **info) -> JobResult:
    return JobResult(Status.OK, outputs=[out], output_dtypes=["float32"], info=info)


def _judged(fp64: JobResult, ours: np.ndarray, evaluator: np.ndarray | None):
    """The ORT fp32 cell of avgpool_divisor.py judged by the exporter rule on the given results (ORT's fp32 outputs
    `ours` on a dynamo graph, the reference evaluator's `evaluator` on it, the backend's float64 job `fp64`)."""
    with rundir.run_directory():
        reg = registry()
        grid = make_grid(str(SPECS / "avgpool_divisor.py"), reg,
                         GridSettings(("ort",), ("fp32",), cache_dir=False))
    cell = grid.cells[0]
    torch32 = WANT * (1 + 3e-8)  # torch's own fp32: within fp32's rounding
    results = {cell: _ok(ours, onnx_exporter="dynamo"), grid.baseline(cell.precision): _ok(torch32),
               grid.key("ort", "cpu", prec.FP64, STATIC): fp64}
    if evaluator is not None:
        results[grid.key(reg.judge_for("onnx"), "cpu", prec.FP32, STATIC)] = _ok(evaluator)
    ev = Evidence(grid, results, JobResult(Status.OK, outputs=[WANT]), JudgeCheck("torch eager"), {}, 1.0)
    (c,) = judge_run(ev, RULES)
    return c


# ORT's fp64 job failed past the export (no double kernel): the export's record did not come back with it
NO_FP64 = JobResult(Status.UNSUPPORTED, message="Could not find an implementation for AveragePool(19)",
                    stage="prepare", component="onnxruntime")
OTHER = WANT * 0.5 + 0.3  # another function's answer


def test_the_backend_and_the_evaluator_agreeing_on_another_function_is_the_exporters_error():
    c = _judged(NO_FP64, OTHER * (1 + 1e-7), OTHER)
    assert c.status == Status.ERROR and (c.stage, c.component) == (ONNX_EXPORT, "torch.onnx"), c.reason
    assert "ONNX reference evaluator agree" in c.reason and "was mismatch" in c.reason
    assert c.info[BLAMED] == "dynamo" and c.info[BLAMED_AT] == "fp32"
    assert [(v.rule, v.now) for v in c.revisions][-1] == (EXPORTER, Status.ERROR)


def test_a_check_the_evaluator_could_not_run_decides_nothing_and_the_fp32_graph_decides():
    fp64 = _ok(WANT, onnx_exporter="dynamo", onnx_export_check="not run: NotImplementedError: Resize antialias")
    c = _judged(fp64, OTHER, OTHER * (1 - 1e-7))
    assert c.status == Status.ERROR and c.component == "torch.onnx" and c.info[BLAMED_AT] == "fp32", c.reason


def test_the_backend_alone_departing_is_its_own_mismatch():
    c = _judged(NO_FP64, OTHER, WANT * (1 + 1e-7))  # the evaluator computes torch's function on that graph
    assert c.status == Status.MISMATCH and c.component is None, c.reason


def test_two_runtimes_sharing_one_order_of_rounding_are_not_another_function():
    """Both sum in fp32 the same way and agree to the bit, trailing torch's by a departure rounding reaches."""
    off = WANT * (1 + ANOTHER_FUNCTION / 20)
    c = _judged(NO_FP64, off, off)
    assert c.status == Status.MISMATCH, c.reason


def test_a_float64_check_that_judged_the_graph_decides_alone():
    c = _judged(_ok(WANT, onnx_exporter="dynamo", **AGREES), OTHER, OTHER)
    assert c.status == Status.MISMATCH, c.reason


@pytest.mark.parametrize("departs", ["dynamo", "torchscript"])
def test_a_float64_export_that_failed_with_its_graph_departing_blames_the_cells_exporter(departs):
    """The fallback raising after dynamo's graph departed still names dynamo's graph (onnxtools/export.py)."""
    fp64 = JobResult(Status.ERROR, message="dynamo exporter: its graph departs", stage=ONNX_EXPORT,
                     component="torch.onnx", info={DEPARTS: departs})
    c = _judged(fp64, OTHER, None)
    assert c.status == Status.ERROR and c.info[BLAMED] == departs and c.info[BLAMED_AT] == "fp64", c.reason


def _judged_both(fp16_exporter: str):
    """The ORT fp32 and fp16 cells of avgpool_divisor.py: fp32 another function (the backend and the evaluator
    agree on it), fp16 over the tolerance but no worse than its baseline (a precision-loss first verdict)."""
    with rundir.run_directory():
        reg = registry()
        grid = make_grid(str(SPECS / "avgpool_divisor.py"), reg,
                         GridSettings(("ort",), ("fp32", "fp16"), cache_dir=False))
    c32, c16 = grid.cells
    results = {c32: _ok(OTHER * (1 + 1e-7), onnx_exporter="dynamo"), grid.baseline(c32.precision): _ok(WANT),
               c16: _ok(OTHER * (1 + 1e-4), onnx_exporter=fp16_exporter), grid.baseline(c16.precision): _ok(OTHER),
               grid.key("ort", "cpu", prec.FP64, STATIC): NO_FP64,
               grid.key(reg.judge_for("onnx"), "cpu", prec.FP32, STATIC): _ok(OTHER)}
    ev = Evidence(grid, results, JobResult(Status.OK, outputs=[WANT]), JudgeCheck("torch eager"), {}, 1.0)
    first = {c.precision: c.status for c in judge_run(ev, ())}
    assert first == {"fp32": Status.MISMATCH, "fp16": Status.PRECISION_LOSS}  # the case this test is about
    return {c.precision: c for c in judge_run(ev, RULES)}


def test_a_precision_loss_on_the_same_exporters_graph_is_charged_with_the_mismatch():
    """interpolate(antialias=True, align_corners=True) on ORT: fp32 is torch.onnx's; the fp16 cell of that graph
    was read as the precision's loss, though it computes the same other function."""
    cells = _judged_both("dynamo")
    assert all(c.status == Status.ERROR and c.component == "torch.onnx" for c in cells.values()), cells
    assert "was precision-loss" in cells["fp16"].reason


def test_a_precision_loss_on_another_exporters_graph_stands():
    cells = _judged_both("torchscript")
    assert cells["fp32"].status == Status.ERROR and cells["fp16"].status == Status.PRECISION_LOSS
