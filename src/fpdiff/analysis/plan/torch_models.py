"""plan for torch models: evidence from ranges and locate, trials of mixed modules on the chosen backend."""
from __future__ import annotations

import copy
import math
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from fpdiff.analysis.plan.onnx_models import verify_onnx
from fpdiff.analysis.plan.search import (
    PRIOR,
    AutocastRemedy,
    OnnxExport,
    Plan,
    Search,
    Speed,
    Trial,
    Unit,
    check_matches,
    finish,
    graph_digest,
    rel_l2,
    settle,
)
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.model import graph, mixed
from fpdiff.model.mixed import program_module
from fpdiff.runtime import rundir

FP32 = prec.get("fp32")
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
    out, _ = run_float64(copy.deepcopy(module).double(), *inputs)
    return _outputs(out)


def _outputs(out) -> list[np.ndarray]:
    flat = torch.utils._pytree.tree_flatten(out)[0]
    return [t.detach().cpu().double().numpy() if t.is_floating_point() else t.cpu().numpy()
            for t in flat if isinstance(t, torch.Tensor)]


class TorchTrials:
    """Runs a keep-set end to end: torch eager in this process, any other backend in a worker (crash-safe)."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: tuple, expected: list, p: prec.Precision, tolerance: float,
                 backend: str, device: str, plugins: tuple[str, ...], flags: tuple[str, ...], timeout: float,
                 cache: str | None) -> None:
        self.gm, self.expected, self.p, self.tolerance = gm, expected, p, tolerance
        self.inputs = prec.cast_inputs(inputs, FP32)
        self.backend, self.device, self.plugins, self.flags = backend, device, plugins, flags
        self.timeout, self.cache = timeout, cache
        from fpdiff.backends import registry
        self.in_process = registry(plugins).cls(backend).reference  # the reference runs here; others in a worker
        self.pool = None
        self.count = 0
        self.dir = rundir.mkdtemp(prefix="fpdiff-plan-")

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    def __call__(self, keep: frozenset[str]) -> Trial:
        t0 = time.perf_counter()
        m = mixed.apply(self.gm, keep, self.p.dtype)
        if self.in_process:
            m = m.to(self.device)
            with torch.no_grad():
                out = _outputs(m(*(t.to(self.device) for t in self.inputs)))
            status = "ok"
        else:
            self.count += 1
            out, status = self._remote(m, self.count)
        err = rel_l2(self.expected, out) if status == "ok" else math.inf
        return Trial(sorted(keep), err, err <= self.tolerance, status, time.perf_counter() - t0)

    def _remote(self, m: torch.fx.GraphModule, i: int) -> tuple[list, str]:
        from fpdiff.runtime.external import Router
        from fpdiff.runtime.task import Job
        from fpdiff.runtime.worker import OK
        from fpdiff.sources import SourceRef, digest
        if self.pool is None:
            self.pool = Router()
        program = torch.export.export(m, self.inputs, strict=False)
        path = self.dir / f"trial-{i}.pt2"
        torch.export.save(program, str(path))
        data = self.dir / f"trial-{i}.inputs.pt"
        torch.save({"fingerprint": digest(path.read_bytes()), "inputs": self.inputs,
                    "input_names": [f"x{j}" for j in range(len(self.inputs))]}, data)
        job = Job(SourceRef("program", str(path), f"plan trial {i}"), str(data), self.backend, "fp32", self.device,
                  graph.STATIC, self.plugins, self.flags, self.cache)
        r = self.pool.run(job, self.timeout)
        if r.status != OK:
            return [], f"{r.status}: {r.message}"
        return [np.asarray(o) for o in r.outputs], "ok"


def evidence(module: torch.nn.Module, inputs: tuple, p: prec.Precision,
             units: list[Unit]) -> tuple[list[str], list[str], list[str], dict[str, list[str]], list[str]]:
    """Candidates ranked by evidence: ranges' risks and locate's culprits first (strong), then ops by their own
    error at P, then ranges' notes and the field's prior (autocast's fp32 list), then the rest in graph order.
    Also the analyses run; one that refuses the model (in one line) leaves the search its other evidence."""
    from fpdiff.analysis.locate import analyse
    from fpdiff.analysis.ranges import measure
    why: dict[str, list[str]] = {}
    analyses = ["ranges (one float64 pass)", f"locate (float64 and {p.name} in lockstep)"]
    r = measure(copy.deepcopy(module), inputs, [p.name])
    for node, reasons in r.origins(p.name).items():
        why.setdefault(node, []).extend(f"ranges: {x}" for x in reasons)
    try:
        ops, _ = analyse(module, inputs, p)
    except UsageError as e:
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
    return ranked, strong, sources, {n: v for n, v in why.items() if n in valid}, analyses


def plan_torch(source, p: prec.Precision, *, backend: str, tolerance: float, device: str,
               plugins: tuple[str, ...], flags: tuple[str, ...], timeout: float, cache: str | None,
               load: Plan | None = None) -> tuple[Plan, torch.fx.GraphModule, list[np.ndarray]]:
    """Search (or re-verify a loaded plan); return it with the fp32 graph module it applies to and the float64
    outputs it was judged against."""
    t0 = time.perf_counter()
    gm = program_module(source.module, source.inputs, p)  # the model as cast to p: check's program at p
    units = units_of(gm)
    plan = Plan(source.ref.label, p.name, backend, tolerance, graph_digest(units), units=len(units))
    expected = _float64_outputs(source.module, source.inputs)
    trials = TorchTrials(gm, source.inputs, expected, p, tolerance, backend, device, plugins, flags, timeout, cache)
    search = Search(units, trials, tolerance)
    try:
        found, why = settle(plan, search, load, source.ref.label,
                            lambda: evidence(source.module, source.inputs, p, units))
        plan = finish(plan, search, found, why, t0)
    finally:
        trials.close()
    return plan, gm, expected


def apply_plan(model: torch.nn.Module, plan: Plan | str | Path, inputs: tuple,
               dynamic_shapes=None) -> torch.fx.GraphModule:
    """The model at the plan's precision except the plan's ops, in fp32 (fp32 in and out); for eager use, for
    torch.compile, or for torch.export / ONNX export."""
    if not isinstance(plan, Plan):
        plan = Plan.load(plan)
    p = prec.get(plan.precision)
    if not p.is_cast or p.name not in ("fp16", "bf16"):
        raise UsageError(f"a plan is for fp16 or bf16, not {plan.precision}")
    gm = program_module(model, inputs, p, dynamic_shapes)
    check_matches(plan, units_of(gm), type(model).__name__)
    return mixed.apply(gm, plan.kept, p.dtype)


def timed(fn, inputs: tuple, reps: int = 5) -> float:
    """Median milliseconds of a call, after one warm-up."""
    with torch.no_grad():
        fn(*inputs)
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn(*inputs)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def speed(module: torch.nn.Module, gm: torch.fx.GraphModule, keep: set[str], inputs: tuple, p: prec.Precision,
          compiled: bool = False) -> Speed:
    """The planned model against fp32 and the pure low precision, side by side in one process."""
    args = prec.cast_inputs(inputs, FP32)
    variants = {"fp32": copy.deepcopy(module).float(), p.name: mixed.apply(gm, frozenset(), p.dtype),
                "plan": mixed.apply(gm, frozenset(keep), p.dtype)}
    if compiled:
        torch._dynamo.reset()
        variants = {k: torch.compile(v) for k, v in variants.items()}
    ms = {k: timed(v, args) for k, v in variants.items()}
    return Speed(f"{'inductor' if compiled else 'torch eager'} cpu", ms, ms["fp32"] / ms["plan"],
                 ms[p.name] / ms["plan"])


def autocast_remedy(module: torch.nn.Module, inputs: tuple, expected: list, p: prec.Precision,
                    tolerance: float) -> AutocastRemedy:
    """Autocast at the same low dtype, judged by the same tolerance, with its speed."""
    amp = prec.get(f"amp-{p.name}")
    m = copy.deepcopy(module).float()
    args = prec.cast_inputs(inputs, FP32)

    def run(*a):
        with torch.autocast("cpu", dtype=amp.autocast):
            return m(*a)
    try:
        with torch.no_grad():
            err = rel_l2(expected, _outputs(run(*args)))
    except Exception as e:  # an op autocast cannot run at this dtype on CPU
        return AutocastRemedy(amp.name, status=Status.UNSUPPORTED, reason=str(e).splitlines()[0])
    return AutocastRemedy(amp.name, error=err, passed=err <= tolerance, ms=timed(run, args), fp32_ms=timed(m, args))


def export_onnx(gm: torch.fx.GraphModule, keep: set[str], p: prec.Precision, inputs: tuple, expected: list,
                tolerance: float, path: str | Path) -> OnnxExport:
    """The planned model as ONNX (fp32 in and out, casts at the plan's borders), verified with ONNX Runtime."""
    import onnx

    from fpdiff.onnxtools.export import export_program
    from fpdiff.onnxtools.graph import graph_inputs
    args = prec.cast_inputs(inputs, FP32)
    program = torch.export.export(mixed.apply(gm, frozenset(keep), p.dtype), args, strict=False)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    export_program(program, path)
    model = onnx.load(str(path))
    names = graph_inputs(model)
    return verify_onnx(model, path, {n: a.numpy() for n, a in zip(names, args)}, expected, tolerance)
