"""ranges's result in the terminal: its own renderer, beside its declaration
(report/terminal.py holds what every analysis shares)."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fpdiff.report import terminal


def render(result, console: Console | None = None, show_all: bool = False) -> None:
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
            inside = f" in {terminal.op_name(o.part_of)}" if o.part_of else ""
            t.add_row(str(o.index), terminal.op_name(o.op) + inside,
                      o.source.rsplit("/", 1)[-1] or o.module, f"{o.max_abs:.2g}",
                      f"{o.min_abs:.2g}" if o.min_abs != float("inf") else "-", str(o.depth or ""),
                      f"[{style}]{d}[/]" if style else d, f"{r.overflow:.0%}", f"{r.flushed:.0%}",
                      f"{r.subnormal:.0%}", f"{r.rounding:.0e}")
            why += [f"#{o.index} {terminal.op_name(o.op)} [red]{d} risk[/]: {x}" for x in r.risks]
            why += [f"#{o.index} {terminal.op_name(o.op)} [yellow]{d} note[/]: {x}" for x in r.notes]
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
