"""plan's result in the terminal: its own renderer, beside its declaration
(report/terminal.py holds what every analysis shares)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fpdiff.core.precision import QUANTIZED
from fpdiff.core.status import Status
from fpdiff.report import terminal


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


def plan_precision_is_float(e) -> bool:
    """An export of an fp16/bf16 plan (its dtypes are read back); a quantized plan's file is judged as a whole."""
    return not any(r.precision in QUANTIZED for r in e.runs)


def render(plan, console: Console | None = None) -> None:
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
    if plan.precision in QUANTIZED and plan.pure_error is None and plan.trials and plan.trials[0].keep:
        line = f"a saved plan re-verified: its {len(plan.kept)} nodes handed to the quantizer again"
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
        if plan.precision in QUANTIZED:  # the quantizer's own nodes left float, of its quantized layers
            made = "float" if plan.backup in ("", "float") else f"at {plan.backup}"
            what = "modules" if all(k.op == "module" for k in ops) else "nodes"
            console.print(f"[green]verified plan[/]: the quantizer leaves {len(ops)} {what} {made} -> error "
                          f"{_err(plan.error)}; {round(plan.low_fraction * plan.units)} of its {plan.units} "
                          f"quantized layers stay {plan.precision}", highlight=False)
        else:
            console.print(f"[green]verified plan[/]: keep {len(ops)} ops in fp32{clamp} -> error "
                          f"{_errs(plan, plan.error, v and v.error)}; {plan.low_fraction:.1%} of the flops stay "
                          f"{plan.precision}", highlight=False)
        if plan.message:
            console.print(f"[yellow]{escape(plan.message)}[/]", highlight=False)
        t = Table(show_lines=False)
        for col in ("node", "op", "module", "source", "why"):
            t.add_column(col, no_wrap=col in ("node", "op"))
        for k in plan.keep:
            t.add_row(k.node, terminal.op_name(k.op), k.module or "(root)", k.source.rsplit("/", 1)[-1],
                      "\n".join(k.why))
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
    read = f"; ops read back: {_dtype_counts(e.op_dtypes)}" if e.op_dtypes or plan_precision_is_float(e) else ""
    console.print(f"export {e.target} {escape(e.path)}: written, {ok}{' ' + '; '.join(runs) if runs else ''}{read}",
                  highlight=False)
    if e.check:
        console.print(f"  check: {escape(e.check)}", highlight=False)
    if not e.verified and e.reason:
        console.print(f"  [yellow]{escape(e.reason)}[/]", highlight=False)
