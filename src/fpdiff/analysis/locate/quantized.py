"""locate for a quantized format: the backend's quantized cell (quant's own, with every optimization on, as it
deploys) read layer by layer. Both readings per quantized layer: where the format costs (the exact emulation against
float64: the sensitive layers) and where the backend departs (its kernel against the emulation fed the backend's own
quantized inputs, in steps); where the backend's graph optimizations change the numbers, the pass that does."""
from __future__ import annotations

from dataclasses import dataclass, field

from fpdiff.analysis.options import RunOptions
from fpdiff.analysis.quant import QuantOptions, quant
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import FAILING, NOT_JUDGED, NOTHING_JUDGED, Status
from fpdiff.judging import quantized
from fpdiff.judging.cell import Cell


@dataclass
class QuantizedReading:
    """One quantized cell read layer by layer: its verdict, every quantized layer in graph order (judging/quantized.py
    layers), the first layer whose kernel departs, the layers where the format costs most."""
    status: Status
    reason: str
    scheme: str
    quantized_by: str
    calibration: str
    metrics: dict
    layers: list[dict] = field(default_factory=list)
    read_back: bool = False  # the backend's quantized values were read back: each kernel weighed alone
    optimizer: dict | None = None  # all optimizations on against all off, and the passes that take a change away
    stage: str | None = None
    component: str | None = None

    @property
    def departs_at(self) -> dict | None:
        """The first departing kernel of a mismatch; none of a cell that reached no verdict (the quantizer's own
        non-finite model is no backend's departure)."""
        return quantized.departing_layer(self.layers) if self.status == Status.MISMATCH else None

    @property
    def hurts_most(self) -> list[dict]:
        return quantized.hurting_layers(self.layers)

    def exit_code(self) -> int:
        """1: the backend departs (mismatch) or the cell failed; NOTHING_JUDGED: the cell reached no verdict."""
        if self.status in FAILING:
            return 1
        return NOTHING_JUDGED if self.status in NOT_JUDGED else 0

    def as_dict(self) -> dict:
        return {**self.__dict__, "status": str(self.status),
                "departs_at": self.departs_at, "hurts_most": [r["tensor"] for r in self.hurts_most]}


def locate_quantized(model: str, backend: str, precision: str, calibration: str | None,
                     shared: RunOptions) -> tuple[str, QuantizedReading, Cell]:
    """The backend's quantized cell for `precision` (the model's label, its reading, the cell), with every layer's
    readings; a backend with no quantization path is one line."""
    p = prec.quantized(precision)
    reg = shared.ready().registry
    if not reg.cls(backend).implements("prepare_quantized"):
        able = [n for n in reg.names() if reg.cls(n).implements("prepare_quantized")]
        raise UsageError(f"{p.name} is a quantized format and {backend} has no quantization path in fpdiff; backends "
                         f"that have one: {', '.join(able)}")
    r = quant(model, QuantOptions(schemes=(p.name,), backends=(backend,), calibration=calibration, layers=True),
              shared)
    cell = r.cells[0]
    info = cell.info or {}
    reading = QuantizedReading(cell.status, cell.reason, str(info.get("scheme") or ""),
                               str(info.get("quantized_by") or ""), r.calibration["how"], dict(cell.metrics or {}),
                               list(info.get("layers") or []), bool(info.get("read_back")), info.get("optimizer"),
                               cell.stage, cell.component)
    return r.model, reading, cell
