"""Every analysis's result in the terminal: one renderer per analysis (its declaration names it), reached through
show(), which adds
the commands that explain what the result found. check's grid: one row per (backend, device, shape variant), one
column per precision."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fpdiff.core.judge_status import OVERRULED, SUSPECT, UPHELD
from fpdiff.core.status import FAILING, Status
from fpdiff.sources.base import display_name


def show(result, render: Callable[..., None], console: Console | None = None, **view) -> None:
    """A result by its analysis's renderer (`view`: that renderer's options, e.g. top, show_all), then what to run
    next."""
    console = console or Console()
    render(result, console, **view)
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


def _brought_in(notes: dict, console: Console) -> None:
    """How a checkpoint or an exported program was brought in: its class, its inputs, the outputs judged."""
    hf, program = notes.get("hf"), notes.get("program")
    if hf:
        console.print(f"[cyan]checkpoint[/cyan] {escape(hf['class'])} ({escape(hf['chosen'])}); inputs: "
                      f"{escape(hf['inputs'])}; outputs judged: {escape(', '.join(hf.get('outputs', [])))}",
                      highlight=False)
    if program:
        dims = ", ".join(f"{n}{d}" for n, d in program.get("dynamic dims", {}).items()) or "none"
        console.print(f"[cyan]exported program[/cyan]: inputs {escape(program['inputs'])}; dynamic dims: "
                      f"{escape(dims)}", highlight=False)


def render(result, console: Console | None = None) -> None:
    console = console or Console()
    precisions = list(dict.fromkeys(c.precision for c in result.cells))
    rows: dict[tuple, dict] = {}
    for c in result.cells:
        rows.setdefault((c.backend, c.device, c.shape_variant), {})[c.precision] = c
    table = Table(title=f"fpdiff check {display_name(result.model)}  (rel L2 vs float64; judge: "
                  f"{result.reference['backend']} float64 on cpu)", show_lines=True)
    for col in ("backend", "device", "shapes"):
        table.add_column(col, style="bold" if col == "backend" else None)
    for p in precisions:
        table.add_column(p, justify="center")
    for (b, d, v), by_p in rows.items():
        table.add_row(b, d, v, *[_cell_text(by_p[p]) if p in by_p else "" for p in precisions])
    _brought_in(getattr(result, "source", None) or {}, console)
    console.print(table)
    for c in result.cells:  # the user's own converted files: which cell ran which, at what precision and why
        said = (c.info or {}).get("artifact")
        if said:
            console.print(f"[cyan]your file[/cyan] in {_label(c)}: {escape(said)} "
                          f"({escape(str(c.info.get('artifact_precision', '')))})", highlight=False)
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
    if judge.get("status") in (SUSPECT, OVERRULED, UPHELD):  # the float64 judge itself in doubt (judging/judge.py)
        style = "bold red" if judge["status"] == OVERRULED else "cyan"
        console.print(f"[{style}]judge[/]: {escape(judge.get('message', ''))}", highlight=False)
    for f in result.reference.get("findings", []):  # the model's own casts, fpdiff's float64 decompositions
        console.print(f"[cyan]{f['kind']}[/cyan] in the float64 judge: {escape(f['message'])}", highlight=False)
    _rejudged(result.rejudged, console)
    s = result.as_dict()["summary"]
    console.print(" ".join(f"{k}={v}" for k, v in s.items() if v) + f"   ({result.duration_s:.1f} s)")
    nothing = result.nothing_judged()
    if nothing:
        console.print(f"[bold red]{nothing}[/]", highlight=False)


def _rejudged(rejudged: dict | None, console: Console) -> None:
    """A stored run judged again: which verdicts the rules of this fpdiff changed, and the rules it could not apply."""
    if rejudged is None:
        return
    changed = rejudged.get("changed") or []
    console.print(f"[cyan]judged again[/] from the stored evidence: {len(changed) or 'no'} verdict"
                  f"{'' if len(changed) == 1 else 's'} changed", highlight=False)
    for c in changed:
        console.print(f"    {c['cell']}: {c['from']} -> {c['to']}", highlight=False)
    for why in rejudged.get("skipped") or []:
        console.print(f"    [yellow]rule not re-applied[/] {escape(why)}", highlight=False)


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


def _within(err, tolerance: float) -> bool:
    return err is not None and err <= tolerance


def _errs(plan, err, real) -> str:
    """An error of the plan's backend; where it computes wider, named so, and beside the error where the precision
    is really computed (`real`, when that ran)."""
    v = plan.verification
    if v is None:
        return _err(err)
    there = f", {_err(real)} in real {v.precision} on {v.backend}" if real is not None else ""
    return f"{_err(err)} on {plan.backend}{there}"


def render_plan(plan, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]fpdiff plan {plan.model} --precision {plan.precision} --backend {plan.backend}[/] "
                  f"(tolerance {plan.tolerance:g}, rel L2 vs float64)", highlight=False)
    v = plan.verification
    if v is not None:
        console.print(f"[yellow]{escape(v.wider)}[/]; each keep-set that passes on {plan.backend} runs again in real "
                      f"{plan.precision} on {v.backend} and passes only if it passes there too", highlight=False)
    pure = "[green]passes[/]" if _within(plan.pure_error, plan.tolerance) and (
        v is None or v.pure_error is None or _within(v.pure_error, plan.tolerance)) else "[red]fails[/]"
    line = f"pure {plan.precision}: {_errs(plan, plan.pure_error, v and v.pure_error)} {pure}"
    if plan.pure_status != Status.OK:
        line = f"pure {plan.precision}: [red]{plan.pure_status}: {escape(plan.pure_reason[:200])}[/]"
    if plan.fp32_error is not None:
        line += f"   all ops fp32: {_err(plan.fp32_error)}"
    console.print(line, highlight=False)
    extra = f" + {len(plan.analyses)} analysis passes ({'; '.join(plan.analyses)})" if plan.analyses else ""
    console.print(f"search: {plan.evaluations} end-to-end evaluations{extra}, {plan.seconds:.1f} s", highlight=False)
    if not plan.passed:
        ran = plan.pure_status == Status.OK or plan.error != float("inf")  # else no error was measured: none ran
        error = f" ({'error' if v is None else f'on {plan.backend}:'} {_err(plan.error)})" if ran else ""
        console.print(f"[bold red]no plan[/]: {escape(plan.message or 'the plan fails its verification')}{error}",
                      highlight=False)
    elif not plan.keep:
        where = f" (on {plan.backend}, and in real {plan.precision} on {v.backend})" if v is not None else ""
        console.print(f"[green]empty plan[/]: the whole model meets the tolerance at {plan.precision}{where}",
                      highlight=False)
    else:
        ops = [k for k in plan.keep if k.op != "clamp constants"]  # the clamp is a remedy, not an op
        clamp = " (and small constants clamped into its range, below)" if len(ops) < len(plan.keep) else ""
        console.print(f"[green]verified plan[/]: keep {len(ops)} ops in fp32{clamp} -> error "
                      f"{_errs(plan, plan.error, v and v.error)}; {plan.low_fraction:.1%} of the flops stay "
                      f"{plan.precision}", highlight=False)
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
            wider = f", not real {plan.precision}" if v is not None and a.backend == plan.backend else ""
            console.print(f"autocast ({a.precision} on {a.backend}{wider}): {_err(a.error)} {ok}{ms}",
                          highlight=False)
    if plan.speed:
        s = plan.speed
        ms = ", ".join(f"{k} {v:.2f} ms" for k, v in s.ms.items())
        vs = [f"plan {s.plan_vs_fp32:.2f}x fp32's throughput"] if s.plan_vs_fp32 is not None else []
        vs += [f"{s.plan_vs_pure:.0%} of pure {plan.precision}'s"] if s.plan_vs_pure is not None else []
        vs += [f"{k} {escape(why[:120])}" for k, why in s.refused.items()]
        console.print(f"speed ({s.where}): {ms} -> {', '.join(vs)}", highlight=False)
    for e in plan.exports:
        _plan_export(e, plan.tolerance, console)


def _dtype_counts(counts: dict | None) -> str:
    return ", ".join(f"{n} {d}" for d, n in sorted((counts or {}).items())) or "none counted"


def _plan_export(e, tolerance: float, console: Console) -> None:
    """One export: the target and file, written or why not, where it ran and its error against the tolerance, the
    dtypes read back from it, and why it is not verified."""
    if not e.written:
        console.print(f"export {e.target} {escape(e.path)}: [red]not written[/] - {escape(e.reason or '')}",
                      highlight=False)
        return
    ok = "[green]verified[/]" if e.verified else "[red]NOT verified[/]"
    runs = [f"on {r.backend} at {r.precision}: "
            + (f"error {_err(r.error)} {'<=' if r.passed else '>'} {tolerance:g}" if r.error is not None
               else escape((r.reason or "did not run")[:300]))
            + (f" (ran {_dtype_counts(r.op_dtypes)})" if r.op_dtypes else "") for r in e.runs]
    console.print(f"export {e.target} {escape(e.path)}: written, {ok}{' ' + '; '.join(runs) if runs else ''}; "
                  f"ops read back: {_dtype_counts(e.op_dtypes)}", highlight=False)
    if e.check:
        console.print(f"  check: {escape(e.check)}", highlight=False)
    if not e.verified and e.reason:
        console.print(f"  [yellow]{escape(e.reason)}[/]", highlight=False)


# one letter per status in the ops matrix, so a (backend, precision) column stays narrow over hundreds of families
OPS_TAGS = {Status.PASS: "P", Status.PRECISION_LOSS: "L", Status.MISMATCH: "M", Status.UNJUDGED: "J",
            Status.ILL_CONDITIONED: "I", Status.UNSUPPORTED: "U", Status.ERROR: "E", Status.CRASH: "C",
            Status.TIMEOUT: "T"}
OPS_FAILING_SHOWN = 40  # failing cells listed one a line; the rest are counted and left to --json
OPS_TOP = 5  # skip reasons and judge disagreements listed
_OPS_SHOWN = (Status.PRECISION_LOSS, *FAILING)  # a family with one of these gets its own matrix row


def _ops_counts(by_status: dict[str, int]) -> str:
    """'12P 1M', each count in its status's style, worst first."""
    items = sorted(by_status.items(), key=lambda kv: (-_ops_status(kv[0]).rank, kv[0]))
    return " ".join(f"[{_ops_status(s).style}]{n}{OPS_TAGS.get(_ops_status(s), '?')}[/]" for s, n in items if n)


def _ops_status(s: str) -> Status:
    try:
        return Status(s)
    except ValueError:  # a status a newer fpdiff wrote: shown as the worst
        return Status.CRASH


def _ops_matrix(result, console: Console, show_all: bool) -> None:
    """Op family x (backend, precision); families with no failing or precision-loss cell fold into one row (their
    counts summed) unless show_all: a sweep has hundreds of families, and the ones that hold need no row each."""
    matrix = result.matrix()
    columns = list(dict.fromkeys((c.backend, c.precision) for c in result.cells))
    console.print(f"[bold]fpdiff {escape(result.model)}[/]: {len(result.cells)} cells judged against float64, "
                  "by op family and (backend, precision)", highlight=False)
    table = Table(show_lines=False)
    table.add_column("family", style="bold")
    for b, p in columns:
        table.add_column(f"{b}\n{p}", justify="right")
    folded: dict[tuple, Counter] = {}
    nfolded = 0
    for fam, by_backend in matrix.items():
        cells = {(b, p): n for b, by_p in by_backend.items() for p, n in by_p.items()}
        if not show_all and not any(_ops_status(s) in _OPS_SHOWN for n in cells.values() for s in n):
            nfolded += 1
            for col, n in cells.items():
                folded.setdefault(col, Counter()).update(n)
            continue
        table.add_row(escape(fam), *[_ops_counts(cells.get(col, {})) for col in columns])
    if nfolded:
        table.add_row(f"+{nfolded} more", *[_ops_counts(folded.get(col, {})) for col in columns])
    console.print(table)
    if nfolded:
        console.print(f"+{nfolded} more: families with no failing or precision-loss cell, summed (the JSON's matrix "
                      "has each)", highlight=False, style="dim")
    console.print("  ".join(f"{t} {s}" for s, t in OPS_TAGS.items()), highlight=False, style="dim")


def _ops_repro(c) -> str:
    r = c.repro or {}
    if not r.get("path"):
        return ""
    again = {True: "re-triggers", False: "[yellow]does not re-trigger[/]", None: "not re-run"}.get(r.get("retriggers"),
                                                                                                  "not re-run")
    return f"  repro {escape(str(r['path']))} ({again})"


def _ops_failing(result, console: Console, top: int) -> None:
    """The failing cells one a line: status, case, where, variant, reason, the repro and whether it re-triggered."""
    bad = result.failing()
    for c in bad[:top]:
        style = Status(c.status).style
        where = f"{c.backend}/{c.precision}/{c.shape_variant}"
        console.print(f"[{style}]{c.status}[/]  {escape(c.case)}  {where}  {escape(c.variant)}: "
                      f"{escape(c.reason)}{_ops_repro(c)}", highlight=False, soft_wrap=True)
    if len(bad) > top:
        console.print(f"... and {len(bad) - top} more failing cells, see --json", highlight=False)


def _ops_extras(result, console: Console) -> None:
    """What was not run, where the catalog disagrees with the judge, and how many repros re-trigger."""
    if result.skipped:
        reasons = Counter(str(s.get("reason", "")) for s in result.skipped)
        top = "; ".join(f"{n} {escape(r)}" for r, n in reasons.most_common(OPS_TOP))
        more = f"; {len(reasons) - OPS_TOP} other reasons" if len(reasons) > OPS_TOP else ""
        console.print(f"skipped {len(result.skipped)} catalog entries: {top}{more}", highlight=False)
    if result.unrun:
        console.print(f"[yellow]{result.unrun} cases not started[/]: the --time budget ran out", highlight=False)
    if getattr(result, "resumed", 0):
        console.print(f"{result.resumed} cases resumed from --resume's report (kept as judged there, not run again)",
                      highlight=False)
    for d in result.judge_disagreements[:OPS_TOP]:
        err = d.get("rel_l2")
        err = f"{err:.1e}" if isinstance(err, float) else str(err)
        console.print(f"[cyan]judge vs catalog[/] {escape(str(d.get('case')))} ({escape(str(d.get('op')))}): "
                      f"rel L2 {err}; {escape(str(d.get('detail', '')))}", highlight=False)
    if len(result.judge_disagreements) > OPS_TOP:
        console.print(f"... and {len(result.judge_disagreements) - OPS_TOP} more judge disagreements, see --json")
    for m in result.mixed_only()[:OPS_TOP]:
        wrong = [v for v, st in m["shapes"].items() if v.startswith("mixed:") and st != "pass"]
        console.print(f"[red]right static and dynamic, wrong in a mix[/] {escape(m['case'])} {escape(m['backend'])}/"
                      f"{escape(m['precision'])}: {escape(', '.join(wrong))}", highlight=False)
    share = result.repro_share()
    if share:
        console.print(share, highlight=False)
    if result.reports:
        console.print(f"{len(result.reports)} distinct bugs, a ready-to-file report each: "
                      + ", ".join(escape(str(r.get("path"))) for r in result.reports[:OPS_TOP])
                      + (", ..." if len(result.reports) > OPS_TOP else ""), highlight=False)


def render_ops(result, console: Console | None = None, top: int = OPS_FAILING_SHOWN, show_all: bool = False) -> None:
    """The matrix, then the failing cells, then what was skipped, the judge's second opinions and the repro share."""
    console = console or Console()
    _ops_matrix(result, console, show_all)
    _ops_failing(result, console, top)
    _ops_extras(result, console)
    _rejudged(result.rejudged, console)
    s = result.summary()
    console.print(" ".join(f"{k}={v}" for k, v in s.items() if v) + f"   ({result.duration_s:.1f} s)",
                  highlight=False)


FUZZ_SHOWN = 20  # findings listed one a line in the terminal; all are in the JSON


def render_fuzz(result, console: Console | None = None) -> None:
    """The campaign in a line, what was discarded and why, then each finding: signature, hits, minimized ops, repro."""
    console = console or Console()
    d = result.as_dict()
    console.print(f"[bold]fpdiff fuzz[/] seed {d['seed']}: {d['graphs']} graphs tested on "
                  f"{', '.join(d['backends'])} x {', '.join(d['precisions'])} ({d['graphs_per_minute']:.1f} per "
                  f"minute), {d['failing_graphs']} failing, {d['discarded']['count']} discarded, "
                  f"{len(d['findings'])} findings   ({result.duration_s:.1f} s)", highlight=False)
    for reason, n in d["discarded"]["by_reason"].items():
        console.print(f"  discarded {n}: {escape(reason)}", highlight=False, style="dim")
    if d["unrun"] or d["lost"]:
        console.print(f"[yellow]{d['unrun']} graphs not started (the --time budget), {d['lost']} lost with their "
                      "Ray batch[/]", highlight=False)
    for f in result.findings[:FUZZ_SHOWN]:
        style = Status(f.status).style
        m = f.minimization
        console.print(f"[{style}]{f.status}[/] {escape(f.backend)}/{escape(f.precision)}  "
                      f"[bold]{escape(' > '.join(f.ops))}[/] ({escape(f.variant)})  hits {len(f.hits) + len(f.matched)}"
                      f"{f'  (one cause with {len(f.merged)} more signatures)' if f.merged else ''}"
                      f"  minimized {m['ops_before']} -> {m['ops_after']} ops in {m['probes']} probes: "
                      f"{escape(f.reason)}{_fuzz_shapes(f.shapes)}{_fuzz_repro(f.repro)}", highlight=False,
                      soft_wrap=True)
    if len(result.findings) > FUZZ_SHOWN:
        console.print(f"... and {len(result.findings) - FUZZ_SHOWN} more findings, see --json", highlight=False)
    _rejudged(result.rejudged, console)


def _fuzz_shapes(shapes: dict) -> str:
    """The shape variants side by side (static pass, dynamic pass, 2 of 3 mixes mismatch), when it has several."""
    if len(shapes) < 2:
        return ""
    ends = [f"{v} {shapes[v]}" for v in ("static", "dynamic") if v in shapes]
    mixes = [st for v, st in shapes.items() if v.startswith("mixed:")]
    worst = [st for st in dict.fromkeys(mixes) if st != "pass"]
    tail = [f"{sum(st == w for st in mixes)} of {len(mixes)} mixes {w}" for w in worst] or \
        ([f"{len(mixes)} mixes pass"] if mixes else [])
    return "  shapes: " + escape(", ".join(ends + tail))


def _fuzz_repro(r: dict | None) -> str:
    r = r or {}
    if not r.get("path"):
        return f"  (no repro: {escape(str(r['error']))})" if r.get("error") else ""
    again = {True: "re-triggers", False: "[yellow]does not re-trigger[/]"}.get(r.get("retriggers"), "not re-run")
    return f"  repro {escape(str(r['path']))} ({again})"

