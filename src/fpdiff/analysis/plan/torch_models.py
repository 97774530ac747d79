"""plan for torch models: evidence from ranges and locate, trials of mixed programs on the named backend."""
from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from fpdiff.analysis.locate import analyse
from fpdiff.analysis.plan.jobs import Jobs, ProgramTrials, trial
from fpdiff.analysis.plan.search import PRIOR, Plan, Search, Trial, Unit, check_matches, finish, graph_digest, settle
from fpdiff.analysis.ranges import measure
from fpdiff.backends.base import Backend, Prepared
from fpdiff.core import precision as prec
from fpdiff.core.errors import NotAnalysable, UsageError
from fpdiff.core.status import Status
from fpdiff.model import graph, mixed
from fpdiff.model.mixed import program_module
from fpdiff.runtime.worker import INTERNAL, JobResult, failure
from fpdiff.sources import Source
from fpdiff.sources.program import op_modules

if TYPE_CHECKING:
    from fpdiff.analysis.plan.search import Progress


_CONTRACT = {"mm", "bmm", "addmm", "baddbmm", "linear", "matmul", "conv1d", "conv2d", "conv3d", "convolution",
             "conv_transpose1d", "conv_transpose2d", "scaled_dot_product_attention", "einsum"}


def _flops(n: torch.fx.Node) -> float:
    val = n.meta.get("val")
    out = val if isinstance(val, torch.Tensor) else next((v for v in (val or []) if isinstance(v, torch.Tensor)), None)
    if out is None:
        return 0.0
    numel = float(math.prod(int(s) for s in out.shape))
    name = mixed.op_name(n.target)
    if name in _CONTRACT and len(n.args) > 1 and isinstance(n.args[1], torch.fx.Node):
        w = n.args[1].meta.get("val")
        if isinstance(w, torch.Tensor) and w.dim():
            if name.startswith("conv"):
                k = math.prod(int(s) for s in w.shape[1:])
            elif name in ("linear",):
                k = int(w.shape[-1])
            else:
                k = int(w.shape[-2]) if w.dim() >= 2 else int(w.shape[-1])
            return 2.0 * numel * k
    return numel


def units_of(gm: torch.fx.GraphModule) -> list[Unit]:
    out = []
    for n in mixed.units(gm):
        path, src = graph.where(n)
        out.append(Unit(n.name, str(n.target), path, src, _flops(n)))
    return out


def _float64_outputs(module: torch.nn.Module, inputs: tuple) -> list[np.ndarray]:
    """The float64 judge check uses: every float op in float64, the model's own casts to fp32 promoted too."""
    from fpdiff.model.float64 import run_float64
    out, _ = run_float64(graph.cast_module(module, prec.FP64, lazy=True), *inputs)  # weights cast per op
    return _outputs(out)


def _outputs(out) -> list[np.ndarray]:
    flat = torch.utils._pytree.tree_flatten(out)[0]
    return [t.detach().cpu().double().numpy() if t.is_floating_point() else t.cpu().numpy()
            for t in flat if isinstance(t, torch.Tensor)]


class TorchTrials(ProgramTrials):
    """A keep-set as a torch.export program (.pt2) of the mixed module, run on the plan's backend in a worker; or,
    when the backend offers prepare_module (eager needs no compile), the mixed module run here by that backend."""
    suffix = ".pt2"

    def __init__(self, jobs: Jobs, backend: str, gm: torch.fx.GraphModule, source: Source, expected: list,
                 p: prec.Precision, tolerance: float, here: Backend | None = None) -> None:
        """`source`: what the trials are fed (its inputs, as fp32, and their names)."""
        super().__init__(jobs, backend, prec.cast_inputs(source.inputs, prec.FP32), source.input_names, expected,
                         tolerance, [u.node for u in units_of(gm)])
        self.gm, self.p, self.here = gm, p, here
        self.requires = op_modules(gm)  # a keep-set's program calls the custom ops of the model's graph: found once
        from fpdiff.model.weights import cast_is_large
        self.lazy = here is not None and jobs.device == "cpu" and cast_is_large(gm, p.dtype)  # eager trials here

    def __call__(self, keep: frozenset[str]) -> Trial:
        if self.here is None:
            return super().__call__(keep)
        t0 = time.perf_counter()
        with self._prepared(keep, self.lazy) as prepared:
            r = _run_here(prepared, self.inputs, self.backend, self.jobs.device)
        return self.verified(trial(keep, r, self.expected, self.tolerance, time.perf_counter() - t0), keep, t0)

    def run(self, keep, repeat: int) -> JobResult:
        """The speed figure: where trials run here, here too, with real weights at their stored dtypes (a weight
        cast per op would time the casts), one keep-set's copy at a time beside the mapped fp32 weights; a program
        file in a worker would load its own copy of every weight."""
        if self.here is None:
            return super().run(keep, repeat)
        times, first = [], None
        with self._prepared(keep, False) as prepared:
            for i in range(max(1, repeat)):  # the first run warms up and gives the outputs
                t0 = time.perf_counter()
                r = _run_here(prepared, self.inputs, self.backend, self.jobs.device, outputs=i == 0)
                times.append(time.perf_counter() - t0)
                if r.status != Status.OK:
                    return r
                first = first or r
        first.run_times, first.run_s = times, times[0]
        return first

    def verify_run(self, keep, backend: str) -> JobResult:
        """The judge (torch eager) runs the keep-set's module here, as eager trials do, on the CPU: no program file
        loaded again in a worker."""
        from fpdiff.analysis.plan.jobs import VERIFY_DEVICE
        from fpdiff.model.weights import cast_is_large
        judge = self.jobs.reg.create(backend)
        if not judge.implements("prepare_module"):
            return super().verify_run(keep, backend)
        with self._prepared(keep, cast_is_large(self.gm, self.p.dtype), judge, VERIFY_DEVICE) as prepared:
            return _run_here(prepared, self.inputs, backend, VERIFY_DEVICE)

    @contextlib.contextmanager
    def _prepared(self, keep, lazy: bool, on: Backend | None = None, device: str | None = None) -> Iterator[Prepared]:
        """The keep-set's mixed module, prepared in this process by the plan's backend (or `on`), closed after."""
        on, device = on or self.here, device or self.jobs.device
        prepared = on.prepare_module(mixed.apply(self.gm, frozenset(keep), self.p.dtype, lazy=lazy), device,
                                     self.jobs.flags.get(on.name, ()))
        try:
            yield prepared
        finally:
            prepared.close()

    def write(self, keep: frozenset[str], path: Path) -> None:
        program = torch.export.export(mixed.apply(self.gm, keep, self.p.dtype), self.inputs, strict=False)
        torch.export.save(program, str(path))

    def export_onnx(self, keep, path: Path) -> None:
        """The keep-set's program as ONNX (fp32 in and out, casts at the plan's borders)."""
        from fpdiff.onnxtools.export import export_program
        export_program(torch.export.export(mixed.apply(self.gm, frozenset(keep), self.p.dtype), self.inputs,
                                           strict=False), path)


def _run_here(prepared: Prepared, inputs: tuple, backend: str, device: str, outputs: bool = True) -> JobResult:
    """The backend's in-process run as a job result: a refusal or a component's error is the trial's answer, as in
    a worker; an error of fpdiff's own code raises. A CUDA run is waited for (its time is the run's); `outputs`
    False leaves them out (a timed repeat)."""
    try:
        out = prepared.run(*inputs)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    except Exception as e:  # classified as the worker classifies a run; our own bugs re-raised below
        r = failure(e, "run", backend)
        if r.component == INTERNAL:
            raise
        return r
    return JobResult(Status.OK, outputs=_outputs(out) if outputs else [])


def evidence(module: torch.nn.Module, inputs: tuple, p: prec.Precision, units: list[Unit],
             gm: torch.fx.GraphModule | None = None) -> tuple:
    """Candidates ranked by evidence: ranges' risks and locate's culprits first (strong), then ops by their own
    error at P, then ranges' notes and the field's prior (autocast's fp32 list), then the rest in graph order.
    Also the analyses run; one that refuses the model (in one line) leaves the search its other evidence. With
    the program `gm`, each op's first-order share of the pure error too (attribution.py), which the search ranks
    by: -> (ranked, strong, sources, why, analyses, share or None)."""
    why: dict[str, list[str]] = {}
    analyses = ["ranges (one float64 pass)", f"locate (float64 and {p.name} in lockstep)"]
    r = measure(module, inputs, [p])  # float64 weights cast per op: no copy of the model
    for node, reasons in r.origins(p.name).items():
        why.setdefault(node, []).extend(f"ranges: {x}" for x in reasons)
    try:
        ops, _ = analyse(module, inputs, p)
    except NotAnalysable as e:
        ops, analyses[1] = [], f"locate refused: {e}"
    for o in ops:
        if o.culprit:
            why.setdefault(o.node, []).append(f"locate: {o.cause}, own error {o.ratio:.3g}x what {p.name} must lose"
                                              if math.isfinite(o.ratio) else f"locate: {o.cause} (non-finite)")
    names = [u.node for u in units]
    valid = set(names)
    strong = [n for n in names if n in why]
    # where problems start: locate's culprits (their own error, not inherited) and ops reading a lost constant
    sources = [n for n in strong if any(w.startswith(("locate:", "ranges: constant ")) for w in why[n])]
    by_ratio = [o.node for o in sorted(ops, key=lambda o: -o.ratio) if o.local is not None and o.node in valid
                and o.node not in why]
    noted = [o.origin for o in r.ops if o.dtypes[p.name].notes and o.origin in valid]
    prior = [u.node for u in units if u.op.split(".")[1 if u.op.startswith("aten.") else 0] in PRIOR]
    ranked = list(dict.fromkeys(strong + by_ratio + noted + prior + names))
    share = _shares(gm, inputs, p, analyses) if gm is not None else None
    return ranked, strong, sources, {n: v for n, v in why.items() if n in valid}, analyses, share


def _shares(gm: torch.fx.GraphModule, inputs: tuple, p: prec.Precision, analyses: list[str]) -> dict | None:
    """Each op's first-order share of the pure error, the analysis named in `analyses`; None (and why) when it
    cannot be computed for this program (the search then ranks by the other evidence)."""
    import os

    from fpdiff.analysis.plan.attribution import shares
    from fpdiff.model.weights import float_sizes
    # The attribution reads the program's weights in float64 one op at a time (LazyCast): it holds the float64
    # activations with their gradients and, at once, one op's float64 weights and the gradient through them. Over half
    # the machine's memory it is skipped and the search ranks by the other evidence. The machine's total, not what
    # is free now: a plan must not change with the machine's load.
    sizes = float_sizes(gm)
    need = 8 * 2 * max(sizes, default=0)
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if need > total / 2:
        analyses.append(f"attribution skipped: one weight in float64 with its gradient needs {need / 2**30:.1f} GB, "
                        f"over half of this machine's {total / 2**30:.1f} GB")
        return None
    try:
        share = shares(gm, inputs, p.dtype)
    except NotAnalysable as e:
        analyses.append(f"attribution refused: {e}")
        return None
    analyses.append("attribution (one float64 pass and its gradient)")
    return share


def plan_torch(source, p: prec.Precision, *, jobs: Jobs, backend: str, tolerance: float,
               load: Plan | None = None, progress: Progress | None = None) -> tuple[Plan, TorchTrials]:
    """Search (or re-verify a loaded plan) with trials on `backend`; return it with its trials, which hold the
    float64 outputs it was judged against and the programs it ran."""
    t0 = time.perf_counter()
    jobs.source_data(source)  # the weights written once and mapped here first: what follows shares them with workers
    gm = program_module(source.module, source.inputs, p)  # the model as cast to p: check's program at p
    units = units_of(gm)
    plan = Plan(source.ref.label, p.name, backend, tolerance, graph_digest(units), units=len(units))
    expected = _float64_outputs(source.module, source.inputs)
    reg = jobs.reg
    here = reg.create(backend) if reg.cls(backend).implements("prepare_module") else None
    trials = TorchTrials(jobs, backend, gm, source, expected, p, tolerance, here)
    search = Search(units, trials, tolerance, progress)
    found, why = settle(plan, search, load, source.ref.label,
                        lambda: evidence(source.module, source.inputs, p, units, gm))
    return finish(plan, search, found, why, t0), trials


def apply_plan(model: torch.nn.Module, plan: Plan | str | Path, inputs: tuple,
               dynamic_shapes=None) -> torch.fx.GraphModule:
    """The model at the plan's precision except the plan's ops, in fp32 (fp32 in and out); for eager use, for
    torch.compile, or for torch.export / ONNX export."""
    if not isinstance(plan, Plan):
        plan = Plan.load(plan)
    p = prec.get(plan.precision)
    if p.cast_dtype not in ("float16", "bfloat16"):
        raise UsageError(f"a plan is for fp16 or bf16, not {plan.precision}")
    gm = program_module(model, inputs, p, dynamic_shapes)
    check_matches(plan, units_of(gm), type(model).__name__)
    return mixed.apply(gm, plan.kept, p.dtype)
