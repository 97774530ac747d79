"""The plan as an ExecuTorch program: the mixed program (kept ops in fp32, the rest at the precision) lowered to
XNNPACK, verified by running the .pte as a user's own file."""
from __future__ import annotations

from pathlib import Path

from fpdiff.analysis.plan.exports import NEEDS_TORCH, Context, ExportTarget, artifact_runner, quiet, run, scratch
from fpdiff.analysis.plan.search import Export


def _executorch(ctx: Context, out: Path, e: Export) -> None:
    """The plan's mixed program (kept ops in fp32, the rest at the precision) lowered with XNNPACK's partitioner as a
    .pte, where each op runs and in which dtype read from the lowered program; verified on ExecuTorch here: a job
    on the `executorch` backend runs the file as a user's own (Job.artifact)."""
    import importlib.util
    if not ctx.is_torch:
        e.reason = NEEDS_TORCH.format(what="ExecuTorch's exporter")
        return
    runner = artifact_runner(ctx.reg, out.suffix)
    if importlib.util.find_spec("executorch") is None or runner is None:
        e.reason = "executorch is not installed (pip install 'fpdiff[executorch]')"
        return
    import torch

    from fpdiff.backends.executorch import write_pte
    from fpdiff.model import mixed
    t = ctx.trials
    with quiet():
        program = torch.export.export(mixed.apply(t.gm, ctx.keep, ctx.p.dtype), t.inputs, strict=False)
        placed = write_pte(program, "xnnpack", out)
    e.written = True
    for per in placed["ops"].values():
        for dtype, n in per.items():
            e.op_dtypes[dtype] = e.op_dtypes.get(dtype, 0) + n
    e.check = "; ".join(f"{where}: " + ", ".join(f"{n} {d}" for d, n in sorted(per.items()))
                        for where, per in placed["ops"].items())
    run(ctx, e, runner, t.program(ctx.keep), t.input_names, ctx.p, artifact=scratch(ctx, out))


EXECUTORCH = ExportTarget("executorch", ".pte", _executorch, "the mixed program lowered to XNNPACK")
