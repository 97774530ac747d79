"""A quantized op case judged as quant judges a user's quantized file: each backend that runs quantized ONNX graphs
runs the case's graph as it is, and the cell is judged by judging/quantized.py against the graph's exact float64
emulation (the backend's quantized values read back, each kernel in steps), and against the float twin's float64
where the case has one (what the format costs). The cell's precision is the graph's format (int8, int8-dynamic,
int4-weight, fp8): the float precisions change nothing in a graph whose numbers are its quantized types."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from fpdiff.analysis.ops.case import Case, OnnxSample, OpsCell
from fpdiff.analysis.ops.sweep import CaseOutcome, SweepConfig, safe_name
from fpdiff.analysis.options import RunOptions
from fpdiff.analysis.quant import QuantOptions, QuantSession
from fpdiff.core import precision as prec
from fpdiff.core.errors import ReferenceFailed, UsageError
from fpdiff.core.status import Status
from fpdiff.core.task import ONNX
from fpdiff.judging.grid import make_grid

# statuses that get a standalone repro (the sweep's own rule): the backend computed something wrong, or failed
REPRO_STATUSES = (Status.MISMATCH, Status.ERROR, Status.CRASH)


def is_quantized(case: Case) -> bool:
    """Whether the case is judged against its emulation (a quantized variant's case)."""
    return isinstance(case.payload, OnnxSample) and case.payload.quantized


def runs_quantized(reg, backend: str) -> bool:
    """A backend that runs a quantized ONNX graph as it is: it takes ONNX models and has a quantized path."""
    cls = reg.cls(backend)
    return ONNX in cls.kinds and cls.implements("prepare_quantized")


def run_case(case: Case, config: SweepConfig, reg, work: Path) -> tuple[CaseOutcome, list]:
    """The case on every backend of the sweep that runs quantized ONNX graphs, each cell judged against the graph's
    emulation; and the repros its failing cells want (none yet: quantized cells say so on their repro entry)."""
    import onnx

    from fpdiff.onnxtools.emulate import file_format
    t0 = time.perf_counter()
    outcome = CaseOutcome(case.case_id)
    backends = [b for b in config.backends if runs_quantized(reg, b)]
    if not backends:
        outcome.skipped = f"no backend of {', '.join(config.backends)} runs quantized ONNX graphs"
        return outcome, []
    s: OnnxSample = case.payload
    folder = work / safe_name(case.case_id)
    folder.mkdir(parents=True, exist_ok=True)
    graph, inputs = folder / "quantized.onnx", folder / "inputs.npz"
    onnx.save(s.model, str(graph))
    np.savez(inputs, **s.inputs)
    source = graph
    if s.float_model is not None:
        source = folder / "float.onnx"
        onnx.save(s.float_model, str(source))
    p = prec.quantized(file_format(s.model) or "int8")
    try:
        grid = make_grid(str(source), reg, config.grid(backends, (prec.FP64.name,), str(inputs)))
        shared = RunOptions(timeout=config.timeout, seed=config.seed).ready()
        own = None if s.float_model is not None else p.name
        with QuantSession(grid, QuantOptions(backends=tuple(backends)), shared, own) as session:
            cells = [session.cell(b, p, artifact=str(graph)) for b in backends]
    except (UsageError, ReferenceFailed) as e:
        outcome.skipped = str(e)
        outcome.duration_s = time.perf_counter() - t0
        return outcome, []
    outcome.cells = [OpsCell.judged(case, c, info=_kept(c.info)) for c in cells]
    for c in outcome.cells:
        c.support = None  # the runtime's support record is read for float kernels; the integer ones are in info
        if c.status in REPRO_STATUSES and config.repro_dir:
            c.repro = {"path": None, "retriggers": None,
                       "error": "quantized cells have no standalone repro yet: the case's graph and inputs are in "
                                "the run folder, and `fpdiff quant` judges them again"}
    outcome.duration_s = time.perf_counter() - t0
    return outcome, []


def _kept(info: dict) -> dict:
    """What of a quantized cell's info the sweep keeps: the scheme, the backend's integer kernels, the worker."""
    return {k: v for k, v in info.items() if k in ("scheme", "integer_ops", "float_ops", "quantized_by", "worker",
                                                   "traceback", "log_tail")}
