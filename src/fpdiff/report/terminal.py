"""What every analysis's terminal renderer shares: show() runs the renderer its declaration names (each lives beside
its declaration, fpdiff/analyses/NAME/text.py) and adds the commands that explain what the result found; a stored
run judged again says what changed; an op's name as a person reads it."""
from __future__ import annotations

from collections.abc import Callable

from rich.console import Console
from rich.markup import escape


def show(result, render: Callable[..., None], console: Console | None = None, **view) -> None:
    """A result by its analysis's renderer (`view`: that renderer's options, e.g. top, show_all), then what to run
    next."""
    console = console or Console()
    render(result, console, **view)
    for command in result.next_steps():
        console.print(f"next: {command}", highlight=False, markup=False, soft_wrap=True)


def rejudged(said: dict | None, console: Console) -> None:
    """A stored run judged again: which verdicts the rules of this fpdiff changed, and the rules it could not apply."""
    if said is None:
        return
    changed = said.get("changed") or []
    console.print(f"[cyan]judged again[/] from the stored evidence: {len(changed) or 'no'} verdict"
                  f"{'' if len(changed) == 1 else 's'} changed", highlight=False)
    for c in changed:
        console.print(f"    {c['cell']}: {c['from']} -> {c['to']}", highlight=False)
    for why in said.get("skipped") or []:
        console.print(f"    [yellow]rule not re-applied[/] {escape(why)}", highlight=False)


def op_name(op: str) -> str:
    """aten.add.Tensor as add, a Python builtin as its name."""
    if op.startswith("<built-in function "):
        return op.removeprefix("<built-in function ").rstrip(">")
    return op.removeprefix("aten.").removeprefix("prims.").rsplit(".", 1)[0]


