"""ops's result in the terminal: its own renderer, beside its declaration
(report/terminal.py holds what every analysis shares)."""
from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fpdiff.core.status import FAILING, Status
from fpdiff.report import terminal

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


def render(result, console: Console | None = None, top: int = OPS_FAILING_SHOWN, show_all: bool = False) -> None:
    """The matrix, then the failing cells, then what was skipped, the judge's second opinions and the repro share."""
    console = console or Console()
    _ops_matrix(result, console, show_all)
    _ops_failing(result, console, top)
    _ops_extras(result, console)
    terminal.rejudged(result.rejudged, console)
    s = result.summary()
    console.print(" ".join(f"{k}={v}" for k, v in s.items() if v) + f"   ({result.duration_s:.1f} s)",
                  highlight=False)
