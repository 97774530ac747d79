"""locate's result in the terminal: its own renderer, beside its declaration
(report/terminal.py holds what every analysis shares)."""
from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fpdiff.core.status import NOT_JUDGED, Status
from fpdiff.report import terminal


def render(result, console: Console | None = None, top: int = 10) -> None:
    console = console or Console()
    console.print(f"[bold]fpdiff locate {result.model} --backend {result.backend} --precision {result.precision}[/]",
                  highlight=False)
    if result.quantized is not None:
        _quantized(result, console, top)
        return
    c = result.culprit
    head = f"torch eager at {result.precision}: "
    if not result.ops:  # an ONNX model: no torch analysis
        head = None
    if head is None:
        pass
    elif c is None:
        console.print(head + f"no op departs (output rel L2 {result.eager_output_error:.2e}); nothing to blame "
                      "beyond ordinary rounding", highlight=False)
    else:
        console.print(head + f"[bold red]{c.op}[/] (node {c.node}, module {c.stack or '(root)'}, {c.source}) "
                      f"- {c.cause}: its own error is {_ratio(c)} what {result.precision} must lose there",
                      highlight=False)
    if result.mark_all is not None:
        first = result.mark_all.first_departure
        n = result.mark_all.tensors
        judged = sum(r.status == Status.MISMATCH for r in result.mark_all.rows)
        if not result.mark_all.refused:
            console.print(f"{result.backend} --mark-all: {n} tensors judged against float64 and the reference "
                          f"evaluator at {result.precision}; {judged} mismatch (caveat: marking outputs can change "
                          f"what {result.backend} fuses)", highlight=False)
        if result.mark_all.refused:
            status = result.mark_all.status
            how = "refused the run" if status in (None, Status.UNSUPPORTED) else f"{status}"
            console.print(f"[bold red]{result.backend} {how}[/]: {escape(result.mark_all.refused)}\n"
                          "run without --mark-all: the segment bisection narrows a refusal to its op", highlight=False)
        if first:
            console.print(f"[bold red]first departure[/]: {first.op} ({first.node}), tensor {first.tensor}: "
                          f"{escape(first.reason)}", highlight=False)
    elif result.bisected:
        seg = result.segment
        if seg is None and any(f.kind == "baseline-nonfinite" for f in result.findings):
            console.print(f"[bold red]{result.backend} at {result.precision}: no verdict[/]: the baseline at the same "
                          f"precision is not finite ({result.compiles} compile)", highlight=False)
        elif seg is None and any(f.kind == "baseline-fails" for f in result.findings):
            console.print(f"{result.backend} at {result.precision}: no op departs from the baseline, which itself "
                          f"fails the tolerance: the precision is too coarse here ({result.compiles} compile)",
                          highlight=False)
        elif seg is None:
            console.print(f"{result.backend} at {result.precision}: the whole graph agrees with the baseline at "
                          f"the same precision within the check rules ({result.compiles} compile)", highlight=False)
        else:
            where = f", module {seg.module or '(root)'}, {seg.source}" if seg.source else ""
            console.print(f"[bold red]{result.backend} departs at {seg.first_op}[/] (node {seg.node}{where}); "
                          f"segment ops {seg.start}..{seg.end - 1}: {', '.join(seg.ops)} - {seg.status}: "
                          f"{escape(seg.reason)}  \\[{result.compiles} compiles]", highlight=False)
    elif result.segment is not None:  # no graph to cut: the stage that failed before any backend (torch.export)
        console.print(f"[bold red]{result.backend} gets no graph[/]: {escape(result.segment.reason)}", highlight=False)
    for f in result.findings:
        if f.kind in ("note", "baseline-nonfinite", "baseline-fails"):
            console.print(f"{f.kind}: {f.message}" + (f" ({f.remedy})" if f.remedy else ""), highlight=False,
                          markup=False)
    if not result.ops:
        return
    t = Table(title="torch eager: worst ops by own error / floor", show_lines=False)
    for col in ("#", "op", "module", "source", "accum.", "local", "ratio", "cause"):
        t.add_column(col, no_wrap=col in ("op", "ratio"))
    for o in result.worst(top):
        t.add_row(str(o.index), terminal.op_name(o.op), o.stack or "(root)", o.source.rsplit("/", 1)[-1],
                  f"{o.accumulated:.1e}", "-" if o.local is None else f"{o.local:.1e}",
                  _ratio(o) if o.local is not None else "-", o.cause)
    console.print(t)


def _ratio(o) -> str:
    import math
    return "inf" if not math.isfinite(o.ratio) else f"{o.ratio:.1f}x"


def _num(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def _quantized(result, console: Console, top: int) -> None:
    """A quantized cell layer by layer: its verdict, the first departing kernel (or that none departs, or why the
    backend's values could not be read), the layers where the format costs most, the optimizer's effect."""
    q = result.quantized
    say = lambda text: console.print(text, highlight=False)  # noqa: E731
    say(f"{result.backend} {result.precision} [{q.status.style}]{q.status}[/]: {escape(q.reason)}")
    if q.scheme:
        say(f"  scheme: {escape(q.scheme)}")
    if q.quantized_by:
        say(f"  quantized by {escape(q.quantized_by)}; calibrated on {escape(q.calibration)}")
    if q.status in NOT_JUDGED or not q.layers:
        for f in result.findings:
            say(f"  [yellow]{f.kind}[/]: {escape(f.message)}")
        return
    bad = q.departs_at
    if bad is not None:
        say(f"[bold red]where {result.backend} departs[/]: the kernel that makes {escape(bad['tensor'])} "
            f"({escape(_ops(bad))}): {bad['steps']:.3g} steps from the emulation fed its own inputs, "
            f"{_num(bad.get('beyond'))} beyond what float32 arithmetic of them can reach ({bad['off']} of "
            f"{bad['values']} values a step or more away; a requantization may round one step the other way)")
    elif q.read_back:
        away = sum(bool(r["off"]) for r in q.layers if r["off"] is not None)
        say(f"where {result.backend} departs: nowhere; each of its {len(q.layers)} quantized kernels is within one "
            f"step of the emulation fed its own inputs, beyond float32's reach ({away} a step away somewhere)")
    else:
        say(f"where {result.backend} departs: not read layer by layer ({result.backend}'s quantized values were not "
            "read back: the backend hands out no intermediate, or marking them changed its outputs); the output "
            f"departs from the emulation by {_num(q.metrics.get('departure'))}")
    effect = q.optimizer or {}
    moved, kernels = effect.get("changes_numbers"), effect.get("moves_quantized") or {}
    if moved:
        by = effect.get("by") or []
        say(f"{result.backend}'s graph optimizations change the outputs by {moved:.3g} (all on against all off)"
            + (f": {' or '.join(by)} disabled alone takes that away" if by else ""))
    if kernels:
        by, at = effect.get("by_kernels") or [], bad["tensor"] if bad is not None else None
        here = f", {kernels[at]:.3g} steps at the departing kernel" if at in kernels else ""
        say(f"{result.backend}'s graph optimizations move {len(kernels)} quantized tensors by more than a step (all "
            f"on against all off{here})" + (f": {' or '.join(by)} disabled alone takes that away" if by else ""))
    t = Table(title="where the format costs most (emulation against float64)", caption="drift: the layer's quantized "
              "value against the float model's, relative L2; added: its own layer's share; recovers: the output "
              "loss that leaving it in float takes away; steps: the backend's kernel against the emulation (past f32: "
              "those beyond what float32 arithmetic of its inputs can reach)")
    for col in ("tensor", "ops", "drift", "added", "recovers", "clipped", "levels", "steps"):
        t.add_column(col, no_wrap=col != "ops")
    shown = q.hurts_most[:top] or q.layers[:top]
    for r in shown + ([bad] if bad is not None and bad not in shown else []):
        t.add_row(escape(r["tensor"]), escape(_ops(r)), _num(r["drift"]), _num(r["added"]), _num(r["recovers"]),
                  f"{r['clipped']}/{r['values']}" if r["clipped"] else "0", str(r["levels"]), kernel_cell(r, _num))
    console.print(t)
    for f in result.findings:
        say(f"  [yellow]{f.kind}[/]: {escape(f.message)}")


def kernel_cell(row: dict, num: Any) -> str:
    """A layer's kernel steps, with those beyond float32's reach where fewer: the steps the rule judges."""
    steps, past = row.get("steps"), row.get("beyond")
    if steps is None or past is None or past >= steps:
        return num(steps)
    return f"{num(steps)} ({num(past)} past f32)"


def _ops(row: dict) -> str:
    """A layer's kernel as its op types, the earliest elided (a model input quantized directly has none)."""
    ops = " + ".join(o.split(" ")[0] for o in row["ops"])
    return ("... + " if row.get("ops_before") else "") + (ops or "the model's input")
