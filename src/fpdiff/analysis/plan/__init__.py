"""The few ops to keep in fp32 so a model meets a tolerance at fp16/bf16: found from evidence, then verified."""
from __future__ import annotations

import math

from fpdiff.analysis.plan.search import AutocastRemedy, OnnxExport, Plan
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.runtime import rundir
from fpdiff.runtime.worker import DEFAULT_TIMEOUT

__all__ = ["Plan", "plan"]


@rundir.scoped
def plan(model: str, *, precision: str = "fp16", backend: str = "torch", tolerance: float | None = None,
         device: str = "cpu", seed: int = 0, plugins: tuple[str, ...] = (), iree_flags: tuple[str, ...] = (),
         timeout: float = DEFAULT_TIMEOUT, cache_dir: str | None = None, inputs: str | None = None,
         shapes: dict[str, list[int]] | None = None, load: str | None = None, save: str | None = None,
         export_onnx: str | None = None, measure_speed: bool = True) -> Plan:
    """Find (or load and re-verify) the ops to keep in fp32 so `model` at `precision` meets `tolerance` on
    `backend`; try autocast when the pure precision fails; optionally save, export to ONNX and time it."""
    from fpdiff.backends import registry
    from fpdiff.sources import load as load_source
    p = prec.get(precision)
    if p.name not in ("fp16", "bf16"):
        raise UsageError(f"plan keeps ops of an fp16 or bf16 model in fp32; --precision {precision} is not one")
    reg = registry(plugins)
    cls = reg.cls(backend)  # unknown names fail before any work
    loaded = Plan.load(load) if load else None
    if loaded is not None and loaded.precision != p.name:
        raise UsageError(f"the plan in {load} is for {loaded.precision}, not {p.name}")
    source = load_source(model, seed=seed, inputs=inputs, shapes=shapes)
    tol = tolerance if tolerance is not None else source.tolerance.get(p.name, p.tolerance)
    if not (tol > 0 and math.isfinite(tol)):
        raise UsageError(f"--tolerance must be a positive number, got {tol}")
    from fpdiff.core.paths import cache_root
    cache = cache_dir or str(cache_root())
    flags = tuple(iree_flags) if cls.takes_flags else ()
    if source.ref.kind == "onnx":
        from fpdiff.analysis.plan import onnx_models as po
        if not cls.verifies_onnx_plans:
            can = ", ".join(n for n in reg.names() if reg.cls(n).verifies_onnx_plans)
            raise UsageError(f"plan on an ONNX model verifies its mixed graphs on ONNX Runtime (--backend {can}), "
                             f"not {backend}; for torch.compile or IREE, plan the model's torch source")
        result, trials = po.plan_onnx(source, p, backend=backend, tolerance=tol, load=loaded)
        exporter = lambda: po.export_onnx(trials, result.kept, export_onnx)  # noqa: E731
    else:
        from fpdiff.analysis.plan import torch_models as pt
        result, gm, expected = pt.plan_torch(source, p, backend=backend, tolerance=tol, device=device,
                                             plugins=tuple(plugins), flags=flags, timeout=timeout, cache=cache,
                                             load=loaded)
        if result.pure_error is None or not result.pure_error <= tol:
            if cls.runs_modules:
                result.autocast = pt.autocast_remedy(source.module, source.inputs, expected, p, tol)
            else:
                result.autocast = _autocast_cell(model, backend, p, tol, device, plugins, iree_flags, timeout, seed)
        if result.passed and measure_speed and cls.runs_modules:  # eager, or compiled when not the reference
            result.speed = pt.speed(source.module, gm, result.kept, source.inputs, p, compiled=not cls.reference)
        exporter = lambda: pt.export_onnx(gm, result.kept, p, source.inputs, expected, tol, export_onnx)  # noqa: E731
    if export_onnx and result.passed:
        try:
            result.export = exporter()
        except OSError as e:  # the plan itself stands; only the file could not be written
            result.export = OnnxExport(export_onnx, False, reason=f"cannot write: {e.strerror or e}")
    if save and result.passed:
        result.save(save)
    return result


def _autocast_cell(model: str, backend: str, p: prec.Precision, tol: float, device: str, plugins, iree_flags,
                   timeout: float, seed: int) -> AutocastRemedy:
    """Autocast on a backend other than torch: one check cell, its error judged by the plan's tolerance."""
    from fpdiff.analysis.check import check
    r = check(model, backends=[backend], precisions=[f"amp-{p.name}"], devices=[device], plugins=list(plugins),
              iree_flags=list(iree_flags), shape_variants=["static"], seed=seed, timeout=timeout)
    c = r.cells[0]
    err = (c.metrics or {}).get("rel_l2")
    ok = isinstance(err, float) and err <= tol and c.status in ("pass", "precision-loss")
    return AutocastRemedy(f"amp-{p.name}", status=c.status, reason=c.reason, error=err, passed=ok)
