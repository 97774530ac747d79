"""Every analysis's result in the terminal: one renderer per kind (RENDERERS), reached through show(), which adds
the commands that explain what the result found. check's grid: one row per (backend, device, shape variant), one
column per precision."""
from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fpdiff.analysis.check.judge import OVERRULED, SUSPECT, UPHELD
from fpdiff.core.status import Status


def show(result, console: Console | None = None, **view) -> None:
    """A result by its kind's renderer (`view`: that renderer's options, e.g. top, show_all), then what to run next."""
    console = console or Console()
    RENDERERS[result.kind](result, console, **view)
    for command in result.next_steps():
        console.print(f"next: {command}", highlight=False, markup=False, soft_wrap=True)


def _cell_text(c) -> str:
    style = Status(c.status).style
    text = f"[{style}]{c.status}[/{style}]"
    if c.metrics and c.metrics.get("rel_l2") is not None:
        v = c.metrics["rel_l2"]
        text += f"\n{v:.1e}" if isinstance(v, float) else f"\n{v}"
    marks = sorted({f.kind for f in c.findings if f.kind != Status.UNSUPPORTED})
    if marks:
        text += "\n[cyan]" + ",".join(marks) + "[/cyan]"
    return text


def render(result, console: Console | None = None) -> None:
    console = console or Console()
    precisions = list(dict.fromkeys(c.precision for c in result.cells))
    rows: dict[tuple, dict] = {}
    for c in result.cells:
        rows.setdefault((c.backend, c.device, c.shape_variant), {})[c.precision] = c
    table = Table(title=f"fpdiff check {result.model}  (rel L2 vs float64; judge: {result.reference['backend']} "
                  "float64 on cpu)", show_lines=True)
    for col in ("backend", "device", "shapes"):
        table.add_column(col, style="bold" if col == "backend" else None)
    for p in precisions:
        table.add_column(p, justify="center")
    for (b, d, v), by_p in rows.items():
        table.add_row(b, d, v, *[_cell_text(by_p[p]) if p in by_p else "" for p in precisions])
    console.print(table)
    for c in result.cells:
        if c.status != Status.PASS:
            console.print(f"[{Status(c.status).style}]{c.status}[/]  {_label(c)}: {escape(c.reason)}", highlight=False)
    grouped: dict[tuple, list[str]] = {}
    for c in result.cells:
        for f in c.findings:
            if f.kind == Status.UNSUPPORTED and not f.remedy:
                continue  # the status line above says it all
            grouped.setdefault((f.kind, f.message, f.remedy), []).append(_label(c))
    for (kind, message, remedy), where in grouped.items():
        cells = ", ".join(where) if len(where) <= 3 else f"{len(where)} cells ({where[0]}, ...)"
        console.print(f"[cyan]{kind}[/cyan] in {cells}: {escape(message)}", highlight=False)
        if remedy:
            console.print(f"    [green]remedy[/green]: {escape(remedy)}", highlight=False)
    judge = result.judge or {}
    if judge.get("status") in (SUSPECT, OVERRULED, UPHELD):  # the float64 judge itself in doubt (check/judge.py)
        style = "bold red" if judge["status"] == OVERRULED else "cyan"
        console.print(f"[{style}]judge[/]: {escape(judge.get('message', ''))}", highlight=False)
    for f in result.reference.get("findings", []):  # the model's own casts, fpdiff's float64 decompositions
        console.print(f"[cyan]{f['kind']}[/cyan] in the float64 judge: {escape(f['message'])}", highlight=False)
    s = result.as_dict()["summary"]
    console.print(" ".join(f"{k}={v}" for k, v in s.items() if v) + f"   ({result.duration_s:.1f} s)")
    nothing = result.nothing_judged()
    if nothing:
        console.print(f"[bold red]{nothing}[/]", highlight=False)


def _label(c) -> str:
    return f"{c.backend}/{c.device}/{c.precision}/{c.shape_variant}"


def render_locate(result, console: Console | None = None, top: int = 10) -> None:
    console = console or Console()
    console.print(f"[bold]fpdiff locate {result.model} --backend {result.backend} --precision {result.precision}[/]",
                  highlight=False)
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
        if seg is None:
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
        if f.kind == "note":
            console.print(f"note: {f.message}" + (f" ({f.remedy})" if f.remedy else ""), highlight=False, markup=False)
    if not result.ops:
        return
    t = Table(title="torch eager: worst ops by own error / floor", show_lines=False)
    for col in ("#", "op", "module", "source", "accum.", "local", "ratio", "cause"):
        t.add_column(col, no_wrap=col in ("op", "ratio"))
    for o in result.worst(top):
        t.add_row(str(o.index), _op_name(o.op), o.stack or "(root)", o.source.rsplit("/", 1)[-1],
                  f"{o.accumulated:.1e}", "-" if o.local is None else f"{o.local:.1e}",
                  _ratio(o) if o.local is not None else "-", o.cause)
    console.print(t)


def _ratio(o) -> str:
    import math
    return "inf" if not math.isfinite(o.ratio) else f"{o.ratio:.1f}x"


def _op_name(op: str) -> str:
    if op.startswith("<built-in function "):
        return op.removeprefix("<built-in function ").rstrip(">")
    return op.removeprefix("aten.").removeprefix("prims.").rsplit(".", 1)[0]


def render_ranges(result, console: Console | None = None, show_all: bool = False) -> None:
    console = console or Console()
    console.print(f"[bold]fpdiff ranges {result.model}[/]: {len(result.ops)} ops of the float64 run "
                  "(composite ops opened)", highlight=False)
    t = Table(show_lines=False, caption="over: share > max; flush: nonzero -> 0; sub: subnormal; "
              "round: rel L2 of rounding")
    for col in ("#", "op", "source", "max|x|", "min|x|>0", "depth", "dtype", "over", "flush", "sub", "round"):
        t.add_column(col, no_wrap=True, justify="right" if col in ("#", "depth") else "left")
    why = []
    for o in result.ops:
        for d in result.dtypes:
            r = o.dtypes[d]
            if not (show_all or r.risks or r.notes):
                continue
            style = "bold red" if r.risks else ("yellow" if r.notes else "")
            inside = f" in {_op_name(o.part_of)}" if o.part_of else ""
            t.add_row(str(o.index), _op_name(o.op) + inside,
                      o.source.rsplit("/", 1)[-1] or o.module, f"{o.max_abs:.2g}",
                      f"{o.min_abs:.2g}" if o.min_abs != float("inf") else "-", str(o.depth or ""),
                      f"[{style}]{d}[/]" if style else d, f"{r.overflow:.0%}", f"{r.flushed:.0%}",
                      f"{r.subnormal:.0%}", f"{r.rounding:.0e}")
            why += [f"#{o.index} {_op_name(o.op)} [red]{d} risk[/]: {x}" for x in r.risks]
            why += [f"#{o.index} {_op_name(o.op)} [yellow]{d} note[/]: {x}" for x in r.notes]
    if t.rows:
        console.print(t)
    for line in why:
        console.print(line, highlight=False)
    for c in result.constants:
        text = "; ".join(f"{x}" for xs in c.dtypes.values() for x in xs)
        console.print(f"[red]constant[/] {c.kind} {c.name} (used by {', '.join(c.used_by)}): {text}", highlight=False)
    for d in result.dtypes:
        risky, noted = result.risky(d), result.noted(d)
        lost = [c for c in result.constants if c.dtypes.get(d)]
        verdict = "[bold red]at risk[/]" if risky or lost else ("[yellow]notes only[/]" if noted else "[green]fits[/]")
        console.print(f"{d}: {verdict} - {len(risky)} risky ops, {len(noted)} with notes, {len(lost)} constants "
                      "that do not survive", highlight=False)
    if not show_all:
        console.print("(ops without findings hidden; --all shows every op)")


def _err(v) -> str:
    return "inf/NaN" if v is None or v == float("inf") else f"{v:.2e}"


def render_plan(plan, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]fpdiff plan {plan.model} --precision {plan.precision} --backend {plan.backend}[/] "
                  f"(tolerance {plan.tolerance:g}, rel L2 vs float64)", highlight=False)
    pure = "[green]passes[/]" if plan.pure_error is not None and plan.pure_error <= plan.tolerance else "[red]fails[/]"
    line = f"pure {plan.precision}: {_err(plan.pure_error)} {pure}"
    if plan.pure_status != Status.OK:
        line = f"pure {plan.precision}: [red]{plan.pure_status}: {escape(plan.pure_reason[:200])}[/]"
    if plan.fp32_error is not None:
        line += f"   all ops fp32: {_err(plan.fp32_error)}"
    console.print(line, highlight=False)
    extra = f" + {len(plan.analyses)} analysis passes ({'; '.join(plan.analyses)})" if plan.analyses else ""
    console.print(f"search: {plan.evaluations} end-to-end evaluations{extra}, {plan.seconds:.1f} s", highlight=False)
    if not plan.passed:
        console.print(f"[bold red]no plan[/]: {escape(plan.message or 'the plan fails its verification')} "
                      f"(error {_err(plan.error)})", highlight=False)
    elif not plan.keep:
        console.print(f"[green]empty plan[/]: the whole model meets the tolerance at {plan.precision}", highlight=False)
    else:
        ops = [k for k in plan.keep if k.op != "clamp constants"]  # the clamp is a remedy, not an op
        clamp = " (and small constants clamped into its range, below)" if len(ops) < len(plan.keep) else ""
        console.print(f"[green]verified plan[/]: keep {len(ops)} ops in fp32{clamp} -> error {_err(plan.error)}; "
                      f"{plan.low_fraction:.1%} of the flops stay {plan.precision}", highlight=False)
        if plan.message:
            console.print(f"[yellow]{escape(plan.message)}[/]", highlight=False)
        t = Table(show_lines=False)
        for col in ("node", "op", "module", "source", "why"):
            t.add_column(col, no_wrap=col in ("node", "op"))
        for k in plan.keep:
            t.add_row(k.node, _op_name(k.op), k.module or "(root)", k.source.rsplit("/", 1)[-1], "\n".join(k.why))
        console.print(t)
    if plan.autocast:
        a = plan.autocast
        if a.error is None:
            console.print(f"autocast ({a.precision}): {a.status} - {escape(a.reason or '')}", highlight=False)
        else:
            ok = "[green]meets the tolerance[/]" if a.passed else "[red]misses the tolerance[/]"
            fp32 = f" vs fp32 {a.fp32_ms:.2f} ms" if a.fp32_ms is not None else ""
            ms = f", {a.ms:.2f} ms{fp32}" if a.ms is not None else ""
            console.print(f"autocast ({a.precision} on {a.backend}): {_err(a.error)} {ok}{ms}", highlight=False)
    if plan.speed:
        s = plan.speed
        ms = ", ".join(f"{k} {v:.2f} ms" for k, v in s.ms.items())
        vs = [f"plan {s.plan_vs_fp32:.2f}x fp32's throughput"] if s.plan_vs_fp32 is not None else []
        vs += [f"{s.plan_vs_pure:.0%} of pure {plan.precision}'s"] if s.plan_vs_pure is not None else []
        vs += [f"{k} {escape(why[:120])}" for k, why in s.refused.items()]
        console.print(f"speed ({s.where}): {ms} -> {', '.join(vs)}", highlight=False)
    if plan.export:
        e = plan.export
        ok = "[green]verified[/]" if e.verified else "[red]NOT verified[/]"
        detail = f"error {_err(e.error)}" if e.error is not None else escape(e.reason or "")
        console.print(f"ONNX {e.path}: {ok} on {e.backend or 'no backend'} ({detail}); {e.fp32_nodes} nodes compute "
                      f"in fp32, {e.low_nodes} in {plan.precision}", highlight=False)


# each analysis's renderer, by its result's kind: (result, console, **view)
RENDERERS: dict[str, Callable[..., None]] = {"check": render, "locate": render_locate, "ranges": render_ranges,
                                             "plan": render_plan}
