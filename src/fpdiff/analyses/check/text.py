"""check's result in the terminal: its own renderer, beside its declaration
(report/terminal.py holds what every analysis shares)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fpdiff.core.judge_status import OVERRULED, SUSPECT, UPHELD
from fpdiff.core.status import Status
from fpdiff.report import terminal
from fpdiff.sources.base import display_name


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
    terminal.rejudged(result.rejudged, console)
    s = result.as_dict()["summary"]
    console.print(" ".join(f"{k}={v}" for k, v in s.items() if v) + f"   ({result.duration_s:.1f} s)")
    nothing = result.nothing_judged()
    if nothing:
        console.print(f"[bold red]{nothing}[/]", highlight=False)


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


def _label(c) -> str:
    return f"{c.backend}/{c.device}/{c.precision}/{c.shape_variant}"
