"""The terminal: every result shown by its kind's renderer, the commands that explain it after, each once; every
status with its rank, style and colour (reports keep no tables of their own)."""
import io

import pytest
from rich.console import Console

from fpdiff import analyses
from fpdiff.analysis.check import Cell, CheckResult
from fpdiff.analysis.ranges import RangesResult
from fpdiff.core.status import CELL_STATUSES, Status, worst

LOCATE = "fpdiff locate example:tinycnn --backend iree --precision fp16"


def shown(result, **view) -> str:
    console = Console(record=True, width=160, file=io.StringIO(), color_system=None)
    analyses.show(result, console, **view)
    return console.export_text()


def test_a_check_shows_its_grid_then_each_next_command_once():
    cells = [Cell("iree", "cpu", "fp16", "static", Status.MISMATCH, "rel L2 0.9 is 2000x the baseline's",
                  metrics={"rel_l2": 0.9}),
             Cell("torch", "cpu", "fp16", "static", "pass", "ok", metrics={"rel_l2": 4e-4})]
    r = CheckResult("example:tinycnn", cells, {"backend": "torch"}, {}, 1.0, next=[LOCATE])
    text = shown(r)
    assert "fpdiff check example:tinycnn" in text and "mismatch  iree/cpu/fp16/static" in text
    assert text.count(f"next: {LOCATE}") == 1 and text.index("next:") > text.index("mismatch=1")
    assert r.as_dict()["kind"] == "check" and r.as_dict()["next"] == [LOCATE] and r.exit_code() == 1


def test_every_kind_has_its_renderer():
    assert {a.name for a in analyses.all_analyses()} == {"check", "locate", "ranges", "plan", "ops", "fuzz", "quant"}
    text = shown(RangesResult("example:rmsnorm", ["fp16"]), show_all=True)
    assert "fpdiff ranges example:rmsnorm" in text and "fp16: fits" in text and "next:" not in text


def test_statuses_carry_rank_style_and_colour():
    assert all(s.style and s.colour.startswith("#") for s in Status)
    ranks = [Status.PASS.rank, Status.PRECISION_LOSS.rank, Status.UNSUPPORTED.rank, Status.MISMATCH.rank]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4
    assert worst(["pass", "precision-loss", "crash", "unjudged"]) is Status.CRASH and worst([]) is None
    assert {s.rank for s in CELL_STATUSES} == {0, 1, 2, 3}
    with pytest.raises(ValueError):
        Status("fine")
