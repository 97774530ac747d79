"""The exporter is a stage, checked: a float64 export must compute what the torch program computes, run by the float64
reference evaluator on the same inputs, or the failure is torch.onnx's, never the backend's that runs the graph."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import fpdiff
from fpdiff.core.errors import ONNX_EXPORT, StageError
from fpdiff.onnxtools.export import DEPARTS, export_info, export_program, rounding_bound
from fpdiff.sources.spec import build, import_spec

SPECS = Path(__file__).parents[1] / "specs"


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
    assert info["onnx_export_check"].startswith("agrees") and info[DEPARTS] == "dynamo"  # the rules read the field


@pytest.mark.slow
def test_no_exporter_carrying_the_program_is_torch_onnx_error_at_export(tmp_path):
    program, module, xs = _program("export_leaky_slope.py", torch.float64)
    with pytest.raises(StageError) as e:
        export_program(program, tmp_path / "m.onnx", module=module, args=xs)
    assert (e.value.stage, e.value.component) == (ONNX_EXPORT, "torch.onnx")
    assert str(e.value).count("departs from the torch program") == 2 and "1.00e+00" in str(e.value)
    assert e.value.facts == {DEPARTS: "torchscript"}


class AntialiasCorners(torch.nn.Module):
    """Bilinear resize with antialias and align_corners: dynamo's graph (Resize with antialias) computes another
    function, and the TorchScript exporter has no translation of the op at all."""

    def forward(self, x):
        return torch.nn.functional.interpolate(x, size=(5, 3), mode="bilinear", align_corners=True, antialias=True)


@pytest.mark.slow
def test_a_departing_dynamo_graph_stays_a_fact_when_the_fallback_raises(tmp_path):
    m, xs = AntialiasCorners(), (torch.randn(1, 2, 8, 8, dtype=torch.float64),)
    with pytest.raises(StageError) as e:
        export_program(torch.export.export(m, xs, strict=False), tmp_path / "m.onnx", module=m, args=xs)
    assert (e.value.stage, e.value.component) == (ONNX_EXPORT, "torch.onnx")
    assert "departs from the torch program" in str(e.value) and "UnsupportedOperatorError" in str(e.value)
    assert e.value.facts == {DEPARTS: "dynamo"}  # the exporter rule charges a cell that ran dynamo's graph by it


class AddInPlace(torch.nn.Module):
    """Writes its input before reading it: the check's own run of the program must not change what the evaluator, the
    fallback's trace and the backend are fed."""

    def forward(self, x):
        x.add_(1.0)
        return x * 2


@pytest.mark.slow
def test_a_program_writing_its_input_is_checked_on_its_own_inputs_and_leaves_them_as_they_were(tmp_path):
    m, x = AddInPlace(), torch.randn(3, 4, dtype=torch.float64)
    xs = (x.clone(),)
    info = export_program(torch.export.export(m, (x.clone(),), strict=False), tmp_path / "m.onnx", module=m, args=xs)
    assert info["onnx_exporter"] == "dynamo" and info["onnx_export_check"].startswith("agrees"), info
    assert torch.equal(xs[0], x)


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


class ScaledShift(torch.nn.Module):
    """`x * 0.1 + 1.0`: dynamo stores both Python scalars as float32 constants, 0.1 then 1.5e-9 off."""

    def forward(self, x):
        return x * 0.1 + 1.0


def _exported(module: torch.nn.Module, x: torch.Tensor, tmp_path: Path) -> dict:
    module, x = module.double(), x.double()
    return export_program(torch.export.export(module, (x,), strict=False), tmp_path / "m.onnx", module=module,
                          args=(x,))


@pytest.mark.slow
def test_a_float64_export_departing_by_float64_rounding_alone_records_no_departure(tmp_path):
    """A LayerNorm whose eps float32 holds exactly (2^-16): the graph computes the same float64 arithmetic in
    another order, and departs by float64's rounding (~1e-16), which blames no exporter and floors no cell."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16, eps=2 ** -16), torch.nn.Linear(16, 8))
    info = _exported(m, torch.randn(4, 16), tmp_path)
    assert info["onnx_exporter"] == "dynamo" and "onnx_export_departure" not in info, info
    seen = float(re.search(r"rel L2 (\S+),", info["onnx_export_check"]).group(1))
    assert 0 < seen < 1e-15 < info["onnx_export_explained"] < 1e-13, info  # a real, float64-sized departure
    assert info["onnx_export_check"].startswith("agrees") and "departs" not in info["onnx_export_check"]


@pytest.mark.slow
def test_a_float32_constant_is_a_departure_beyond_float64_rounding(tmp_path):
    info = _exported(ScaledShift(), torch.randn(4, 8), tmp_path)
    assert info["onnx_exporter"] == "dynamo"
    assert 1e-10 < info["onnx_export_departure"] < 1e-7, info  # 0.1 in float32: 1.5e-9
    assert info["onnx_export_departure"] > 1e3 * info["onnx_export_explained"]
    assert "departs" in info["onnx_export_check"] and "float32" in info["onnx_export_check"]


def _graph(tmp_path: Path, nodes: int, width: int) -> Path:
    """A chain of `nodes` Relu nodes over a `width`-element input, saved beside an exporter record."""
    names = ["x", *(f"y{i}" for i in range(nodes))]
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", [a], [b]) for a, b in zip(names, names[1:])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.DOUBLE, [width])],
        [onnx.helper.make_tensor_value_info(names[-1], onnx.TensorProto.DOUBLE, [width])])
    path = tmp_path / "m.onnx"
    onnx.save(onnx.helper.make_model(graph), str(path))
    return path


def test_the_rounding_bound_grows_with_the_graph_and_its_longest_sum(tmp_path):
    u = 2.0 ** -53
    assert rounding_bound(onnx.load(str(_graph(tmp_path, 3, 16)))) == pytest.approx(u * (4 * 3 + 4))
    assert rounding_bound(onnx.load(str(_graph(tmp_path, 3, 16))), sizes=(10000,)) == pytest.approx(u * (12 + 100))
    assert rounding_bound(onnx.load(str(_graph(tmp_path, 3, 16))), 2.0 ** -24) == pytest.approx(2.0 ** -24 * 16)


def test_a_cached_record_from_before_the_bound_is_bounded_when_read(tmp_path):
    """An export cached with a float64-rounding departure recorded (6.5e-17) reads back without it: the cell gets
    no export floor and no export-departure finding from an old cache; a real departure stays."""
    path = _graph(tmp_path, 3, 16)
    info_file = path.with_name("m.export.json")
    info_file.write_text(json.dumps({"onnx_exporter": "dynamo", "onnx_export_departure": 6.5e-17,
                                     "onnx_export_check": "agrees with the torch program in float64"}))
    info = export_info(path)
    assert "onnx_export_departure" not in info and info["onnx_export_check"].startswith("agrees")
    info_file.write_text(json.dumps({"onnx_exporter": "dynamo", "onnx_export_departure": 4.2e-9}))
    assert export_info(path)["onnx_export_departure"] == 4.2e-9


EXACT_EPS_SPEC = """import torch
from torch import nn


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16, eps=2 ** -16), nn.Linear(16, 8))


def inputs():
    return (torch.randn(4, 16),)
"""


@pytest.mark.slow
def test_an_ort_fp64_cell_gets_no_export_floor_for_float64_rounding(tmp_path, monkeypatch):
    """The whole way: the export departs by ~1.6e-16 and the fp64 baseline by 0, so a recorded departure was an
    `export-departure` finding blaming float32 constants the graph does not have."""
    monkeypatch.setenv("FPDIFF_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "exact_eps.py"
    spec.write_text(EXACT_EPS_SPEC)
    (cell,) = fpdiff.check(str(spec), backends=["ort"], precisions=["fp64"]).cells
    assert cell.status == "pass", cell.reason
    assert "onnx_export_departure" not in cell.info and cell.info["onnx_export_check"].startswith("agrees")
    assert not any(f.kind == "export-departure" for f in cell.findings), cell.findings


class _DtypeOnly(torch.nn.Module):
    """x is read only for its dtype: no op reads its values, so the exporter would drop it."""

    def forward(self, x, i):
        return i.to(x.dtype) * 2


def test_an_input_read_only_for_its_dtype_stays_an_input_in_its_place(tmp_path):
    import onnxruntime as ort
    x, i = torch.randn(3, dtype=torch.float64), torch.tensor([1, 2, 3])
    program = torch.export.export(_DtypeOnly(), (x, i))
    path = tmp_path / "m.onnx"
    export_program(program, path)
    model = onnx.load(str(path))
    assert [v.name for v in model.graph.input] == ["x", "i"]
    assert [v.type.tensor_type.elem_type for v in model.graph.input] == [onnx.TensorProto.DOUBLE,
                                                                        onnx.TensorProto.INT64]
    # fed by position, as every backend feeds a cell: the integer lands on the integer input
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = session.run(None, dict(zip([v.name for v in session.get_inputs()], (x.numpy(), i.numpy()))))[0]
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])
