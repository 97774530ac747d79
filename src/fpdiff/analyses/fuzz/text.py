"""fuzz's result in the terminal: its own renderer, beside its declaration
(report/terminal.py holds what every analysis shares)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from fpdiff.core.status import Status
from fpdiff.report import terminal

FUZZ_SHOWN = 20  # findings listed one a line in the terminal; all are in the JSON


def render(result, console: Console | None = None) -> None:
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
    terminal.rejudged(result.rejudged, console)


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
