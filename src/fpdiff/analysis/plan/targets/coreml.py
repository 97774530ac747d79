"""The plan as a Core ML package: coremltools' fp16 compute precision with the plan's ops kept fp32 by its
op_selector, the converted program's dtypes read back and checked against the plan."""
from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from fpdiff.analysis.plan.exports import NEEDS_TORCH, Context, ExportTarget, one_line, quiet
from fpdiff.analysis.plan.search import Export, ExportRun

# The Core ML op types coremltools' FP16ComputePrecision leaves alone, or that hold no arithmetic: never checked.
_COREML_SKIP = {"const", "cast"}


class Owners:
    """Which plan ops each Core ML op computes. coremltools names an op after the torch node it converts (its
    name, or its name and a suffix: linear_0, mean_axes_0, mul_cast_fp16) and keeps that node's stack trace; a name
    is taken only where the traces agree. An op named otherwise (the parts of a decomposed group_norm) belongs to
    every plan op of its stack trace."""

    def __init__(self, program, units: Iterable[str]) -> None:
        units = set(units)
        self.unit: dict[str, str] = {}  # program node -> the plan op it computes
        self.trace: dict[str, str] = {}
        self.by_trace: dict[str, set[str]] = {}
        for n in program.graph.nodes:
            if n.op != "call_function":
                continue
            self.trace[n.name] = (n.meta.get("stack_trace") or "").strip()
            unit = _origin(n, units)
            if unit is not None:
                self.unit[n.name] = unit
                self.by_trace.setdefault(self.trace[n.name], set()).add(unit)
        self.names = sorted(self.trace, key=len, reverse=True)  # the longest name first: mul_1 before mul

    def __call__(self, op) -> frozenset[str]:
        name = op.name.removesuffix("_cast_fp16").removeprefix("_inversed_")
        trace = _op_trace(op)
        for node in self.names:
            if name == node or name.startswith(node + "_"):
                if trace and self.trace[node] and trace != self.trace[node]:
                    continue  # another node's name prefix (add_0 of a group norm is no `add` of the model)
                return frozenset({self.unit[node]}) if node in self.unit else frozenset()
        return frozenset(self.by_trace.get(trace, ())) if trace else frozenset()


def _op_trace(op) -> str:
    """The torch stack trace coremltools keeps on a Core ML op (its EXIR_STACK_TRACE scope)."""
    scopes = {str(k): v for k, v in (op.scopes or {}).items()}
    return ((scopes.get("ScopeSource.EXIR_STACK_TRACE") or [""])[0] or "").strip()


def _op_dtype(op) -> str | None:
    """The dtype a Core ML op computes in, by its first tensor output: fp16, fp32, ..."""
    from coremltools.converters.mil.mil import types
    outs = [o for o in op.outputs if types.is_tensor(o.sym_type) or types.is_scalar(o.sym_type)]
    return types.builtin_to_string(outs[0].dtype) if outs else None


def _origin(n, units: set[str]) -> str | None:
    """The plan op a program node came from: the first name along its provenance (torch's from_node) that is one
    of the plan's ops, the node's own name first."""
    if n.name in units:
        return n.name
    src = n.meta.get("from_node") or []
    while src:
        if src[-1].name in units:
            return src[-1].name
        src = src[-1].from_node
    return None


def coreml_model(gm, inputs: tuple, fp32_ops: Iterable[str]):
    """The plan's program converted by coremltools at fp16 compute precision, every Core ML op of the ops in
    `fp32_ops` left in fp32 by FP16ComputePrecision's op_selector; and who owns each Core ML op. Converted from the
    program with every plan op in fp32 (the model's own fp32 weights), so the converter's selector alone decides."""
    import torch

    from fpdiff.model import mixed
    units = frozenset(n.name for n in mixed.units(gm))
    keep = frozenset(fp32_ops)
    with quiet():  # importing coremltools warns about untested torch and scikit-learn versions
        import coremltools as ct
        program = torch.export.export(mixed.apply(gm, units, torch.float16), inputs,
                                      strict=False).run_decompositions({})
    owners = Owners(program, units)

    def fp16(op) -> bool:  # coremltools asks per op: True casts it to fp16
        return op.op_type in _COREML_SKIP or not (owners(op) & keep)
    with quiet():
        model = ct.convert(program, convert_to="mlprogram", skip_model_load=sys.platform != "darwin",
                           compute_precision=ct.transform.FP16ComputePrecision(op_selector=fp16))
    return model, owners


def coreml_check(model, owners: Owners, keep: Iterable[str]) -> tuple[dict[str, int], list[str]]:
    """The converted program read back: its arithmetic ops by dtype, and what departs from the plan (an op of a
    kept plan op in fp16, an op of the others in fp32, a kept op with no Core ML op found)."""
    from fpdiff.backends.coreml import MOVES, mil_ops
    keep = set(keep)
    counts: dict[str, int] = {}
    wrong, found = [], set()
    for op in mil_ops(model):
        dt = _op_dtype(op)
        if op.op_type in MOVES or dt not in ("fp16", "fp32"):
            continue
        name = {"fp16": "float16", "fp32": "float32"}[dt]
        counts[name] = counts.get(name, 0) + 1
        own = owners(op)
        if not own:
            continue
        kept = bool(own & keep)
        found |= own & keep
        if (dt == "fp32") != kept:
            wrong.append(f"{op.op_type} {op.name} ({'/'.join(sorted(own))}) computes in {dt}, the plan "
                         f"{'keeps it in fp32' if kept else 'has it fp16'}")
    wrong += [f"kept {k} has no Core ML op here (fused into another?)" for k in sorted(keep - found)]
    return counts, wrong


def _coreml(ctx: Context, out: Path, e: Export) -> None:
    """The plan as an .mlpackage: coremltools' FP16ComputePrecision with the plan's ops kept fp32 by its
    op_selector, the converted program's dtypes read back and checked against the plan. Its numbers need macOS:
    verified here only on a Mac."""
    import importlib.util
    if not ctx.is_torch:
        e.reason = NEEDS_TORCH.format(what="coremltools")
        return
    if ctx.p.cast_dtype != "float16":
        e.reason = f"Core ML computes in fp32 or fp16; a {ctx.p.name} plan has no Core ML form"
        return
    if importlib.util.find_spec("coremltools") is None:
        e.reason = "coremltools is not installed (pip install 'fpdiff[coreml]')"
        return
    model, owners = coreml_model(ctx.trials.gm, ctx.trials.inputs, ctx.keep)
    if out.is_dir():  # an earlier export: coremltools writes the package anew
        shutil.rmtree(out)
    with quiet():
        model.save(str(out))
    e.written = True
    e.op_dtypes, wrong = coreml_check(model, owners, ctx.keep)
    kept = e.op_dtypes.get("float32", 0)
    e.check = (f"the kept ops compute in fp32 and the rest in fp16 ({kept} Core ML ops fp32, "
               f"{e.op_dtypes.get('float16', 0)} fp16)")
    if wrong:
        e.check = f"{len(wrong)} Core ML ops depart from the plan: " + "; ".join(wrong[:4])
        e.reason = f"the converted program is not the plan: {e.check}"
        return
    if sys.platform != "darwin":
        e.reason = ("not verified: Core ML predicts only on macOS; run this plan on a Mac to verify the package "
                    "(a --backend-host coreml=HOST:PORT worker runs jobs, not this file: the coreml backend runs "
                    "no converted file of the user's)")
        return
    _coreml_predict(ctx, out, e)


def _coreml_predict(ctx: Context, out: Path, e: Export) -> None:
    """On a Mac: the written package's predictions on the plan's inputs, judged like every run."""
    import coremltools as ct
    import numpy as np
    t = ctx.trials
    try:
        with quiet():
            model = ct.models.MLModel(str(out))
            spec = model.get_spec().description
            feeds = {i.name: np.asarray(x.float() if x.is_floating_point() else x)
                     for i, x in zip(spec.input, t.inputs)}
            got = model.predict(feeds)
        outputs = [np.asarray(got[o.name]) for o in spec.output]
    except Exception as x:  # Core ML's refusal of the package
        e.runs.append(ExportRun("coreml", ctx.p.name, reason=f"error: {one_line(x)}"))
        return
    from fpdiff.analysis.plan.search import rel_l2
    err = rel_l2(t.expected, outputs)
    e.runs.append(ExportRun("coreml", ctx.p.name, err, err <= t.tolerance))


COREML = ExportTarget("coreml", ".mlpackage", _coreml, "fp16 compute precision, the kept ops fp32")
