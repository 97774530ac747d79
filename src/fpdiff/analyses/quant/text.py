"""quant's result in the terminal: its own renderer, beside its declaration."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _num(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def render(result, console: Console | None = None) -> None:
    console = console or Console()
    console.print(f"[bold]fpdiff quant {result.model}[/]: each cell against float64 and against the exact float64 "
                  "emulation of the quantized model it ran", highlight=False)
    t = Table(caption="loss: emulation vs float64 (what the format costs); departure: backend vs emulation "
              "(relative L2, and in steps of the output)")
    for col in ("backend", "format", "verdict", "vs float64", "loss", "departure", "steps", "integer ops", "float"):
        t.add_column(col, no_wrap=True)
    for c in result.cells:
        m = c.metrics or {}
        ints = c.info.get("integer_ops") or {}
        t.add_row(c.backend, c.precision, f"[{c.status.style}]{c.status}[/]", _num(m.get("rel_l2")),
                  _num(m.get("quantization_loss")), _num(m.get("departure")), _num(m.get("departure_steps")),
                  str(sum(ints.values())) if ints else "-", str(c.info.get("float_ops", "-")))
    console.print(t)
    for c in result.cells:
        console.print(f"[bold]{c.backend} {c.precision}[/] [{c.status.style}]{c.status}[/]: {c.reason}",
                      highlight=False)
        if c.info.get("scheme"):
            console.print(f"  scheme: {c.info['scheme']}", highlight=False)
        if c.info.get("quantized_by"):
            console.print(f"  quantized by {c.info['quantized_by']}", highlight=False)
        if c.component and c.status.rank >= 2:
            console.print(f"  at {c.stage} ({c.component})", highlight=False)
        if c.info.get("costs_most_at"):
            console.print(f"  {_costs(c.info['costs_most_at'])}", highlight=False)
        for f in c.findings:
            console.print(f"  [yellow]{f.kind}[/]: {f.message}", highlight=False)
    cal = result.calibration
    console.print(f"calibrated on {cal.get('how')}; judged on {cal.get('judged_on')}", highlight=False)


def _costs(rows: list[dict]) -> str:
    """Where the format costs most, as one line: measured by leaving each in float (a quantization-loss cell), or
    by what each layer added to the drift from the float model."""
    if "recovers" in rows[0]:
        said = ", ".join(f"{r['tensor']} ({r['recovers']:.3g} of the loss)" for r in rows)
        return f"costs most at (the loss each one left in float takes away): {said}"
    said = ", ".join(f"{r['tensor']} (+{r['added']:.3g}, {r['drift']:.3g} from float64)" for r in rows)
    return f"costs most at (drift each layer adds against the float model's own values): {said}"
