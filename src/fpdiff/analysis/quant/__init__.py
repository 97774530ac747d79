"""Quantized formats judged against float64 with the format's own cost apart: each backend quantizes the model with
its own tool (the way its users do), calibrated on inputs it is never judged on; the quantized model it ran is
emulated exactly in float64 (onnxtools/emulate.py), and each cell is judged by the three readings
(judging/quantized.py): the float64 source, the emulation, the backend."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from fpdiff.analysis.base import Result
from fpdiff.analysis.options import RunOptions
from fpdiff.core import precision as prec
from fpdiff.core.errors import EMULATE, UsageError
from fpdiff.core.status import CELL_STATUSES, FAILING, NOT_JUDGED, NOTHING_JUDGED, Status
from fpdiff.core.versions import report_versions
from fpdiff.judging import quantized
from fpdiff.judging.cell import Cell
from fpdiff.judging.grid import STATIC, make_grid
from fpdiff.judging.run import reference, worker_env
from fpdiff.runtime import external, jobdata, rundir
from fpdiff.runtime.task import Job
from fpdiff.runtime.worker import JobResult

__all__ = ["DEFAULT_SCHEMES", "QuantOptions", "QuantResult", "QuantSession", "quant"]

DEFAULT_SCHEMES = ("int8", "int8-dynamic", "int4-weight")
# Calibration inputs drawn when the user gives none: enough for MinMax ranges to settle on a small model, few enough
# that calibrating costs less than judging.
DEFAULT_SAMPLES = 8


@dataclass(frozen=True)
class QuantOptions:
    """quant's own options. `schemes`: the quantized formats (core/precision.py QUANTIZED); `backends`: those with
    a quantization path (Backend.prepare_quantized); `calibration`: an .npz of calibration inputs, one array per
    model input named by it, samples along the first axis (None: `samples` drawn from the example inputs'
    statistics); `artifacts`: the user's own quantized files, BACKEND=PATH, each run as it is and judged against
    MODEL's float64; `layers`: each cell's per-layer readings (judging/quantized.py layers), what locate shows, with
what leaving each layer in float recovers measured for the likeliest. The cells are judged on the model's example
inputs, which calibration never sees."""
    schemes: Sequence[str] = DEFAULT_SCHEMES
    backends: Sequence[str] = ("ort",)
    calibration: str | None = None
    samples: int = DEFAULT_SAMPLES
    artifacts: Sequence[str] = ()  # the user's own quantized files, BACKEND=PATH: judged against MODEL's float64
    layers: bool = False  # each cell's every quantized layer in its info (locate's reading of a quantized cell)


@dataclass
class QuantResult(Result):
    kind: ClassVar[str] = "quant"
    model: str
    cells: list[Cell]
    calibration: dict
    versions: dict
    duration_s: float = 0.0
    fingerprint: str = ""

    def judged(self) -> int:
        return sum(c.status not in NOT_JUDGED for c in self.cells)

    def exit_code(self, strict: bool = False) -> int:
        """1: a cell is a mismatch or failed (an error is something broken); NOTHING_JUDGED: no cell reached a
        verdict; `strict`: quantization-loss and calibration findings fail too."""
        if any(c.status in FAILING for c in self.cells):
            return 1
        if not self.judged():
            return NOTHING_JUDGED
        return int(strict and any(c.status != Status.PASS or c.findings for c in self.cells
                                  if c.status not in NOT_JUDGED))

    def as_dict(self) -> dict:
        return {"kind": self.kind, "fpdiff_version": self.versions.get("fpdiff"), "model": self.model,
                "model_hash": self.fingerprint, "calibration": self.calibration, "versions": self.versions,
                "duration_s": round(self.duration_s, 3), "cells": [c.as_dict() for c in self.cells],
                "summary": {s: sum(c.status == s for c in self.cells) for s in CELL_STATUSES}}


@rundir.scoped
def quant(model: str, options: QuantOptions | None = None, shared: RunOptions | None = None) -> QuantResult:
    """Every (backend, quantized format) cell, judged against float64 and its own emulation; the user's own
    quantized files (`artifacts`) against MODEL's float64; a quantized MODEL against its own emulation alone."""
    t0 = time.perf_counter()
    o, shared = options or QuantOptions(), (shared or RunOptions()).ready()
    formats = [prec.quantized(s) for s in o.schemes if s]  # "" (the command line's --schemes "") names none
    reg = shared.registry
    given = [_artifact(a) for a in o.artifacts]
    for b, path in given:  # a .tflite is LiteRT's to run (the emulation is read from it alone)
        takes = getattr(reg.cls(b), "base", None) or reg.cls(b)
        if path.lower().endswith(".tflite") and ".tflite" not in (takes.artifacts or ()):
            raise UsageError(f"--artifact {b}={path}: {b} does not run .tflite files (litert does)")
    for b in dict.fromkeys([*o.backends, *(b for b, _ in given)]):
        if not reg.cls(b).implements("prepare_quantized"):
            able = [n for n in reg.names() if reg.cls(n).implements("prepare_quantized")]
            raise UsageError(f"{b} has no quantization path in fpdiff; backends that have one: {', '.join(able)}")
    grid = make_grid(model, reg, shared.grid(backends=tuple(o.backends), precisions=(prec.FP64,)))
    own = _own_format(grid.source)  # a quantized MODEL: each backend runs the file itself, judged alone
    mine = getattr(grid.source.ref, "original", None) or grid.source.ref.path  # the user's file, not a conversion
    runs = [(b, prec.quantized(own), mine) for b in o.backends] if own else \
        [(b, p, None) for b in o.backends for p in formats] + [(b, _file_format(path), path) for b, path in given]
    cells = []
    with QuantSession(grid, o, shared, own) as session:
        for b, p, path in runs:
            shared.step(f"{b} {p.name}", len(cells), len(runs))
            cells.append(session.cell(b, p, artifact=path))
    shared.step("done", len(cells), len(cells))
    modules = [m for b in o.backends for m in reg.cls(b).requires]
    return QuantResult(grid.source.ref.label, cells, session.calibration, report_versions(modules),
                       time.perf_counter() - t0, grid.source.fingerprint)


class QuantSession:
    """One model's quantized cells, run and judged on demand: its calibration inputs, job data, float64 truth and
    workers made once (quant's cells, and plan's trials of a quantized format). `own`: MODEL is itself quantized in
    that format (no float source, nothing calibrated)."""

    def __init__(self, grid: Any, o: QuantOptions, shared: RunOptions, own: str | None = None) -> None:
        self.grid, self.o, self.shared, self.own = grid, o, shared, own
        samples, how = _calibration(grid.source, o, grid.seed) if not own else ([], "nothing: the file is quantized")
        self.data = jobdata.of_source(Path(grid.data_path).with_name("quant.pt"), grid.source, calibration=samples)
        self.calibration = {"samples": len(samples), "how": how,
                            "judged_on": "the model's example inputs, which calibration never saw" if not own else
                            "the model's example inputs, against the file's own emulation (no float source)"}
        self.truth: list[np.ndarray] | None = None
        self.last: JobResult | None = None  # the last cell's job: its outputs, for a caller that writes a repro
        self._pool: Any = None

    def __enter__(self) -> QuantSession:
        self._pool = external.pool(worker_env())
        pool = self._pool.__enter__()
        self.run = pool.run
        if not self.own:
            self.truth = reference(self.grid, pool, self.shared.timeout).outputs
        return self

    def __exit__(self, *exc: Any) -> None:
        self._pool.__exit__(*exc)

    def feeds(self, graph: Any) -> dict[str, np.ndarray]:
        """The model's example inputs as `graph` takes them (by name, else by position)."""
        return _feeds(graph, self.grid.source)

    def cell(self, backend: str, p: prec.Precision, artifact: str | None = None, flags: tuple[str, ...] = (),
             layers: bool | None = None) -> Cell:
        """One cell: `backend` at format `p` (its own quantizer, with the user's flags for it and `flags`), or the
        file `artifact` as it is; `layers`: every quantized layer's readings too (default: the options')."""
        s = self.grid.settings
        job = Job(self.grid.source.ref, self.data, backend, p, "cpu", STATIC, s.plugins,
                  (*s.flags.get(backend, ()), *flags), s.cache_dir, s.seed, 1, artifact=artifact)
        self.last = self.run(job, self.shared.timeout)
        return _cell(backend, p, self.last, self.truth, self.grid.source, self.o.layers if layers is None else layers)


def _artifact(text: str) -> tuple[str, str]:
    """BACKEND=PATH of a user's quantized file, checked: the file exists and holds quantized tensors."""
    backend, sep, path = text.partition("=")
    if not sep or not backend or not path:
        raise UsageError(f"--artifact takes BACKEND=PATH (a quantized .onnx), not {text!r}")
    if not Path(path).is_file():
        raise UsageError(f"--artifact {text}: no such file")
    if Path(path).suffix.lower() in (".pte", ".mlpackage", ".mlmodel", ".xml"):
        raise UsageError(f"--artifact {text}: quant reads the user's quantized .onnx (QDQ, QOperator, dynamic or "
                         f"MatMulNBits) and quantized .tflite; a quantized {Path(path).suffix} is not read yet "
                         "(its scales and kernels are not emulated): run it as it is with `fpdiff check --artifact`")
    _file_format(path)
    return backend, path


def _file_format(path: str) -> prec.Precision:
    """The quantized format of a user's file, read from its ops and types; a float or unreadable file is one line."""
    if Path(path).suffix.lower() == ".tflite":
        return prec.quantized(_tflite_format(path))
    import onnx

    from fpdiff.onnxtools.emulate import file_format
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise UsageError(f"{path}: not an ONNX file fpdiff can read ({type(e).__name__})") from None
    name = file_format(m)
    if name is None:
        raise UsageError(f"{path} holds no quantized tensor: a float file is judged by `fpdiff check --artifact`")
    return prec.quantized(name)


def _tflite_format(path: str) -> str:
    """A .tflite's quantized format (model/tflite_qdq.is_quantized); a float or fp16 file, or one that cannot be
    read, is one line."""
    from fpdiff.model import tflite_qdq
    try:
        name = tflite_qdq.is_quantized(Path(path))
    except Exception as e:
        raise UsageError(f"{path}: not a .tflite fpdiff can read ({type(e).__name__})") from None
    if name is None:
        raise UsageError(f"{path} holds no integer tensor (a float or fp16 file): quant reads a quantized .tflite "
                         "(full-integer, dynamic-range or weight-only); run this one as it is with "
                         "`fpdiff check --artifact`")
    return name


def _own_format(source: Any) -> str | None:
    """The quantized format of an ONNX MODEL that is itself quantized; None for a float model."""
    if source.ref.kind != "onnx":
        return None
    import onnx

    from fpdiff.onnxtools.emulate import file_format
    mine = getattr(source.ref, "original", None) or source.ref.path
    return file_format(onnx.load(mine, load_external_data=False))


def _cell(backend: str, p: prec.Precision, r: JobResult, truth: list[np.ndarray] | None, source: Any,
          layers: bool = False) -> Cell:
    """One cell from its job: a failure as the component's, a run judged by its three readings; `layers`: every
    quantized layer's readings too."""
    cell = Cell(backend, "cpu", p.name, STATIC.name, Status(r.status), r.message,
                duration_s=round(r.prepare_s + r.run_s, 3), info={"scheme": p.scheme.text() if p.scheme else "",
                                                                    **r.info}, stage=r.stage, component=r.component,
                findings=list(r.notes))  # what the run itself showed (a backend that wrote into its inputs)
    if r.status != Status.OK:
        return cell
    import onnx

    from fpdiff.judging.conditioning import onnx_output_ops
    from fpdiff.onnxtools.emulate import emulate, kernel_ops, upstream_activations
    q = r.quantized or {}
    cell.info.update({("quantized_graph" if k == "graph" else k): v for k, v in q.items()})
    graph = onnx.load(q["graph"])
    feeds = _feeds(graph, source)
    t = time.perf_counter()
    try:
        reference, unmeasured = _reference(q, feeds, graph) if truth is not None else (None, None)
        if unmeasured:
            cell.info["costs_unmeasured"] = unmeasured
        emu = emulate(graph, feeds, reference=reference)
        forced = r.read_back or None
        local = emulate(graph, feeds, forced) if forced else None
    except Exception as e:  # the judge's own limit (an op its emulation lacks): the cell says so, the run goes on
        cell.status, cell.stage, cell.component = Status.ERROR, EMULATE, "fpdiff's emulation"
        cell.reason = f"fpdiff cannot emulate this quantized graph exactly: {' '.join(str(e).split())[:400]}"
        return cell
    cell.info["emulation_s"] = round(time.perf_counter() - t, 3)
    quantized.judge(cell, p, truth, emu, r.outputs, str(q.get("component") or "the quantizer"), local,
                    onnx_output_ops(graph))
    if cell.status == Status.MISMATCH and local is not None and p.name == "fp8":
        cell.findings.extend(_double_rounding(graph, feeds, forced, local))
    if p.name == "fp8" and q.get("float_graph") and cell.status not in NOT_JUDGED:  # the float graph read only then
        tool = str(q.get("component") or "the quantizer")
        quantized.quantizers_own(cell, quantized.dropped_activations(
            p, _op_counts(onnx.load(q["float_graph"], load_external_data=False)), _op_counts(graph), tool), tool)
    if p.scheme is not None and p.scheme.activations == "float" and q.get("float_graph") and \
            cell.status not in NOT_JUDGED:  # a weight-only graph must be the float graph with its weights rounded
        quantized.quantizers_own(cell, _rewritten(graph, q, feeds, emu.outputs), str(q.get("component") or
                                                                                      "the quantizer"))
    upstream, recovered = {}, None
    if reference:
        upstream = upstream_activations(graph, list(reference))
        likely = quantized.costs(emu.activations, upstream, quantized.ABLATED)
        cell.info["costs_most_at"] = likely[:quantized.COSTS_SHOWN]
        loss = (cell.metrics or {}).get("quantization_loss")  # None: the cell reached no verdict (an error)
        if (cell.status == Status.QUANTIZATION_LOSS or layers) and loss is not None:  # the remedy asked: measure it
            recovered = _recovered(graph, feeds, truth, [r["tensor"] for r in likely], loss)
        if cell.status == Status.QUANTIZATION_LOSS and recovered is not None:
            cell.info["costs_most_at"] = quantized.costs(emu.activations, upstream, recovered=recovered)
    if layers:
        tensors = [a.tensor for a in emu.activations]
        cell.info["layers"] = quantized.layers(emu.activations, upstream, local, kernel_ops(graph, tensors),
                                               recovered)
    if cell.status not in NOT_JUDGED:
        cell.findings.extend(quantized.left_float(q) + quantized.optimizer_finding(q))
    elif cell.status == Status.UNSUPPORTED and q.get("left_float"):
        ops = Counter(n.split(" ")[0] for n in q["left_float"])
        cell.reason += f" (its compute nodes: {', '.join(f'{k} {v}' for k, v in ops.items())})"
    return cell


def _op_counts(m: Any) -> dict[str, int]:
    """How many nodes of each op type a graph holds (its top level)."""
    return dict(Counter(n.op_type for n in m.graph.node))


def _rewritten(graph: Any, q: dict, feeds: dict[str, np.ndarray], emulated: list[np.ndarray]) -> Any:
    """The quantizer-rewrite finding where a weight-only graph computes more than its rounded weights; the check
    failing to run costs this reading only."""
    import onnx

    from fpdiff.onnxtools.weights import rewrite
    try:
        r = rewrite(graph, onnx.load(q["float_graph"]), feeds, emulated)
    except Exception:  # noqa: BLE001 - the cell's own verdict stands; this only explains it
        return None
    tool = str(q.get("component") or "the quantizer")
    return None if r is None else quantized.rewritten(r.apart, r.weights_cost, r.first, r.node, tool)


def _double_rounding(graph: Any, feeds: dict[str, np.ndarray], forced: dict, local: Any) -> list:
    """fp8 kernels beyond a step, held against the what-if that rounds through float16 (quantized.double_rounding);
    a what-if the emulation cannot run says nothing."""
    from fpdiff.onnxtools.emulate import emulate
    try:
        via16 = emulate(graph, feeds, forced, fp8_via=np.float16)
    except Exception:  # noqa: BLE001 - the cell's own emulations ran; this one only explains
        return []
    return quantized.double_rounding(local, via16)


def _recovered(graph: Any, feeds: dict[str, np.ndarray], truth: list[np.ndarray], tensors: list[str],
               loss: float) -> dict[str, float]:
    """For each activation, how much of the format's cost at the output goes away with it alone left in float (the
    emulation with its quantizer bypassed, against float64)."""
    from fpdiff.onnxtools.emulate import emulate
    return {t: loss - quantized.rel_l2(emulate(graph, feeds, bypass=frozenset({t})).outputs, truth) for t in tensors}


def _reference(q: dict, feeds: dict[str, np.ndarray], graph: Any) -> tuple[dict[str, np.ndarray] | None, str | None]:
    """The float model's own float64 values of the tensors the quantized graph quantizes, where the backend named
    the float graph it quantized (`float_graph`) and the two share tensor names; else None, and why where it failed."""
    from fpdiff.onnxtools.emulate import activation_tensors, dequantized, float_values
    if not q.get("float_graph"):
        return None, None
    tensors, twin = activation_tensors(graph), dequantized(graph)
    try:
        values = float_values(q["float_graph"], feeds, [*tensors, *(twin[t] for t in tensors if t in twin)])
        # a tensor the quantizer renamed (ONNX Runtime at a graph output) by its twin's name, which is the float one
        found = {t: values[t] if t in values else values.get(twin.get(t, "")) for t in tensors}
        return {t: v for t, v in found.items() if v is not None} or None, None
    except Exception as e:  # the float graph's own evaluation failing costs this reading only, never the verdict
        return None, f"the float graph's own values could not be computed: {type(e).__name__}: {str(e)[:200]}"


def _feeds(graph: Any, source: Any) -> dict[str, np.ndarray]:
    """The quantized graph's inputs from the model's: by name when the graph names every one as the model does,
    else by position (how a user's file is fed, runtime/artifacts.py), float ones in float32."""
    from fpdiff.onnxtools.emulate import feeds_of
    inputs = [_as_fed(x) for x in source.inputs]
    names = list(source.input_names)
    plain = feeds_of(graph, inputs)
    if set(plain) <= set(names):
        return {n: inputs[names.index(n)] for n in plain}
    return plain


def _as_fed(x: Any) -> np.ndarray:
    """An input as the quantized cell is fed it: float ones in float32 (the format's float side)."""
    t = torch.as_tensor(x)
    return (t.float() if t.is_floating_point() else t).numpy()


def _calibration(source: Any, o: QuantOptions, seed: int) -> tuple[list[tuple], str]:
    """The calibration inputs and how they were made: the user's file, else drawn from the example inputs."""
    if o.calibration:
        given = _calibration_file(Path(o.calibration), source)
        return given, f"the {len(given)} inputs of {Path(o.calibration).name}"
    if isinstance(o.samples, bool) or not isinstance(o.samples, int) or o.samples < 1:
        raise UsageError(f"samples is the number of calibration inputs, an integer above 0, not {o.samples!r}")
    g = torch.Generator().manual_seed(10_000 + seed)
    drawn = [tuple(_draw(x, g) for x in source.inputs) for _ in range(o.samples)]
    return drawn, (f"{o.samples} inputs drawn (seeded) like the example inputs: each float input from a normal "
                   "with its mean and spread, token ids uniformly within their range, masks and bools as given")


def _draw(x: Any, g: torch.Generator) -> torch.Tensor:
    """One calibration input like `x`: floats with its mean and spread, integers within its range (0/1 masks and
    bools as they are)."""
    t = torch.as_tensor(x)
    if t.is_floating_point():
        d = t.double()
        spread = d.std() if d.numel() > 1 else torch.zeros((), dtype=torch.float64)  # one value has no spread
        return (torch.randn(t.shape, generator=g, dtype=torch.float64) * spread + d.mean()).to(t.dtype)
    if t.dtype == torch.bool or t.numel() == 0 or int(t.min()) >= 0 and int(t.max()) <= 1:
        return t.clone()
    return torch.randint(int(t.min()), int(t.max()) + 1, t.shape, generator=g, dtype=t.dtype)


def _calibration_file(path: Path, source: Any) -> list[tuple]:
    """The user's calibration inputs: an .npz with one array per model input, named by it, samples first."""
    if not path.is_file():
        raise UsageError(f"--calibration {path}: no such file")
    try:
        data = np.load(path)
    except Exception as e:
        raise UsageError(f"--calibration {path}: not an .npz file ({type(e).__name__})") from None
    names = list(source.input_names)
    missing = [n for n in names if n not in data.files]
    if missing:
        raise UsageError(f"--calibration {path}: no array for input {', '.join(missing)} (it has "
                         f"{', '.join(data.files) or 'none'}; one array per input, samples along the first axis)")
    counts = {n: data[n].shape[0] if data[n].ndim else 0 for n in names}
    if len(set(counts.values())) != 1 or not next(iter(counts.values())):
        raise UsageError(f"--calibration {path}: every input needs the same number of samples along the first axis "
                         f"({', '.join(f'{n}: {c}' for n, c in counts.items())})")
    for n, x in zip(names, source.inputs):
        if tuple(data[n].shape[1:]) != tuple(torch.as_tensor(x).shape):
            raise UsageError(f"--calibration {path}: input {n} samples are {list(data[n].shape[1:])}, the model "
                             f"takes {list(torch.as_tensor(x).shape)}")
    return [tuple(torch.from_numpy(np.ascontiguousarray(data[n][i])) for n in names)
            for i in range(next(iter(counts.values())))]

