"""The survives-precision rule's numbers: a cell far more accurate than its precision's baseline computed wider than
asked, whatever its backend reports; a backend that fuses kernels and keeps float32 inside them is not."""
import pytest

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.compare import Metrics
from fpdiff.core.status import Status
from fpdiff.judging.cell import Cell
from fpdiff.judging.cells import WIDER_FACTOR, _dtype_by_numbers, _wider_by_numbers


def _metrics(rel_l2: float) -> Metrics:
    return Metrics(rel_l2, rel_l2, rel_l2, 1.0, 60.0, 1.0, 1.0, rel_l2, 0, 0, 1000)


def _cell(err: float, base: float, p: prec.Precision, reported: str) -> Cell:
    cell = Cell("b", "cpu", p.name, "static", Status.PASS, metrics=_metrics(err).as_dict(), computed_dtype=reported)
    cell.effective_bits = compare.effective_bits(_metrics(err), _metrics(base), p.compute)
    return cell


def test_a_bf16_cell_fifty_times_below_its_baseline_computed_wider():
    """OpenVINO's bf16 hint on a CPU without bf16 arithmetic: DistilBERT at 1.0e-4 against torch's 5.2e-3."""
    cell = _cell(1.0e-4, 5.2e-3, prec.BF16, "bfloat16")
    f = _wider_by_numbers(cell, prec.BF16, _metrics(5.2e-3))
    assert f is not None and f.kind == "computed-wider" and "52x below" in f.message and "~14-bit" in f.message
    assert _dtype_by_numbers(cell, prec.BF16) == "bfloat16+float32 (by its numbers, ~14 bits; reported bfloat16)"


def test_a_cell_that_ran_float32_is_read_as_float32():
    cell = _cell(1.0e-7, 7.1e-4, prec.FP16, "float16")
    assert _wider_by_numbers(cell, prec.FP16, _metrics(7.1e-4)) is not None
    assert _dtype_by_numbers(cell, prec.FP16).startswith("float32 (by its numbers; reported float16")


@pytest.mark.parametrize("ratio", [0.4, 1.0, 2.5, WIDER_FACTOR * 0.9])
def test_fused_kernels_that_keep_float32_inside_are_not_wider(ratio):
    """inductor at fp16/bf16 on the corpus: 0.4x-1.1x torch eager's error, at most 2.5x below it."""
    base = 5.0e-3
    cell = _cell(base / ratio, base, prec.BF16, "bfloat16")
    assert _wider_by_numbers(cell, prec.BF16, _metrics(base)) is None


def test_fp32_is_not_held_to_the_rule():
    """fp32's baseline error is mostly its inputs' rounding; computing it wider decides nothing."""
    cell = _cell(1.0e-9, 1.0e-7, prec.FP32, "float32")
    assert _wider_by_numbers(cell, prec.FP32, _metrics(1.0e-7)) is None


def test_a_baseline_without_error_says_nothing():
    cell = _cell(0.0, 0.0, prec.FP16, "float16")
    assert _wider_by_numbers(cell, prec.FP16, _metrics(0.0)) is None



def test_a_substituted_format_whose_baseline_did_not_come_back_is_unjudged_not_mismatch():
    # OpenVINO ran an fp16 cell in bf16 (its record) while the bf16 baseline timed out under load: the error cannot
    # be weighed against what ran (the same cell, with its baseline, is bf16's precision loss)
    from fpdiff.judging.cells import _unweighable
    from fpdiff.runtime.worker import JobResult
    cell = Cell("openvino", "cpu", "fp16", "static", Status.MISMATCH, "rel L2 2.82e-02 is 28.4x the baseline's")
    _unweighable(cell, prec.BF16, JobResult("timeout", message="no answer within 600 s; the process was killed"))
    assert cell.status == Status.UNJUDGED and cell.revisions[-1].rule == "computed-format"
    assert "computed in bf16 (its own record)" in cell.reason and "no answer within 600 s" in cell.reason
