"""The exporter is a stage, checked: a float64 export must compute what the torch program computes, run by the float64
reference evaluator on the same inputs, or the failure is torch.onnx's, never the backend's that runs the graph."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import fpdiff
from fpdiff.core.errors import ONNX_EXPORT, StageError
from fpdiff.onnxtools.export import export_program, scaled_rel_l2
from fpdiff.sources.spec import build, import_spec

SPECS = Path(__file__).parents[1] / "specs"


def test_scaled_rel_l2_neither_underflows_nor_overflows():
    tiny = np.array([1e-160, -3e-160, 2e-160])
    assert scaled_rel_l2(tiny, np.zeros(3)) == pytest.approx(1.0)  # unscaled, 1e-320 squares read 0 / 0
    assert scaled_rel_l2(tiny, tiny * (1 + 1e-12)) == pytest.approx(1e-12, rel=1e-3)
    huge = np.array([1e200, -2e200])
    assert scaled_rel_l2(huge, huge * (1 + 1e-9)) == pytest.approx(1e-9, rel=1e-3)  # unscaled: inf / inf = nan


def test_scaled_rel_l2_exact_where_equal_and_infinite_where_not_finite():
    a = np.array([1.0, np.nan, np.inf])
    assert scaled_rel_l2(a, a.copy()) == 0.0
    assert scaled_rel_l2(a, np.array([1.0, 0.0, np.inf])) == float("inf")
    assert scaled_rel_l2(np.ones(3), np.ones(4)) == float("inf")


def _program(spec: str, dtype: torch.dtype):
    path = SPECS / spec
    m, xs = build(import_spec(path), path, 0)
    m = m.to(dtype)
    xs = tuple(x.to(dtype) for x in xs)
    return torch.export.export(m, xs, strict=False), m, xs


@pytest.mark.slow
def test_a_float64_graph_that_departs_from_its_program_is_dynamos_failure_and_the_fallback_is_checked(tmp_path):
    program, module, xs = _program("export_tiny_scalars.py", torch.float64)
    info = export_program(program, tmp_path / "m.onnx", module=module, args=xs)
    # dynamo stores 1e-80 as a float32 constant (0.0): its graph answers 0 where the program answers ~1e-160
    assert info["onnx_exporter"] == "torchscript"
    assert "departs from the torch program" in info["onnx_exporter_why"] and "1.00e+00" in info["onnx_exporter_why"]
    assert info["onnx_export_check"].startswith("agrees")


@pytest.mark.slow
def test_no_exporter_carrying_the_program_is_torch_onnx_error_at_export(tmp_path):
    program, module, xs = _program("export_leaky_slope.py", torch.float64)
    with pytest.raises(StageError) as e:
        export_program(program, tmp_path / "m.onnx", module=module, args=xs)
    assert (e.value.stage, e.value.component) == (ONNX_EXPORT, "torch.onnx")
    assert str(e.value).count("departs from the torch program") == 2 and "1.00e+00" in str(e.value)


@pytest.mark.slow
def test_below_float64_a_float32_constant_is_what_the_format_holds(tmp_path):
    program, module, xs = _program("export_tiny_scalars.py", torch.float32)
    info = export_program(program, tmp_path / "m.onnx", module=module, args=xs)
    assert info == {"onnx_exporter": "dynamo"}  # unchecked: the check is for float64 exports


@pytest.mark.slow
def test_ort_fp64_cells_are_never_blamed_for_the_exporters_graph():
    ok = fpdiff.check(str(SPECS / "export_tiny_scalars.py"), backends=["ort"], precisions=["fp64"])
    (cell,) = ok.cells
    assert cell.status == "pass", cell.reason  # ORT runs the graph that agrees (TorchScript's)
    assert cell.info["onnx_exporter"] == "torchscript" and "departs" in cell.info["onnx_exporter_why"]
    bad = fpdiff.check(str(SPECS / "export_leaky_slope.py"), backends=["ort"], precisions=["fp64"])
    (cell,) = bad.cells
    assert cell.status == "error" and (cell.stage, cell.component) == (ONNX_EXPORT, "torch.onnx"), cell.reason
    assert "departs from the torch program" in cell.reason


@pytest.mark.slow
def test_a_float32_attribute_is_a_recorded_departure_and_the_cells_floor_not_an_exporter_error(tmp_path):
    program, module, xs = _program("export_float32_epsilon.py", torch.float64)
    info = export_program(program, tmp_path / "m.onnx", module=module, args=xs)
    assert info["onnx_exporter"] == "dynamo"  # the same function with a float32 epsilon: no fallback, no error
    assert 1e-12 < info["onnx_export_departure"] < 1e-5, info
    assert "departs" in info["onnx_export_check"]
    r = fpdiff.check(str(SPECS / "export_float32_epsilon.py"), backends=["ort"], precisions=["fp64"])
    (cell,) = r.cells
    assert cell.status in ("pass", "precision-loss"), cell.reason  # never mismatch for a constant it was handed
    if cell.status == "precision-loss":
        assert any(f.kind == "export-departure" for f in cell.findings), cell.findings
