"""locate at a quantized format, on real ONNX Runtime and OpenVINO with every optimization on: each quantized layer's
two readings (where the format costs, where the backend departs), a planted kernel bug found at its kernel on both
backends, a layer whose channels need their own scales found where the format costs, and bad input as one line."""
import json
from pathlib import Path

import pytest

import fpdiff
from conftest import PLUGINS, SPECS
from fpdiff.cli import main
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status

pytestmark = pytest.mark.slow  # real quantizers and backends
ORT_PLANTED, OV_PLANTED = str(PLUGINS / "quant_zero_point.py"), str(PLUGINS / "quant_zero_point_ov.py")


def test_a_healthy_ort_int8_cell_reads_every_kernel_within_a_step_and_ranks_where_it_costs():
    r = fpdiff.locate("example:tinyformer", backend="ort", precision="int8")
    q = r.quantized
    assert q.status == Status.PASS and q.read_back and r.exit_code() == 0
    assert len(q.layers) == 26 and all(row["steps"] is not None and row["steps"] <= 1 for row in q.layers)
    assert q.departs_at is None and r.answer() is None
    by = {row["tensor"]: row for row in q.layers}
    assert by["matmul"]["ops"] == ["MatMul node_matmul"] or by["matmul"]["ops"][-1].startswith("MatMul")
    assert by["x"]["ops"] == [] and by["x"]["drift"] > 0  # the model's input, quantized as it comes
    # the drift a layer adds is its own: never more than the layer's drift against the float model
    assert all(row["added"] <= row["drift"] + 1e-12 for row in q.layers if row["drift"] is not None)
    # what leaving a layer in float recovers is measured for the likeliest; the first ranked recovers the most
    first = q.hurts_most[0]
    assert first["recovers"] is not None and first["recovers"] == max(
        row["recovers"] for row in q.layers if row["recovers"] is not None)
    # ONNX Runtime's QDQ fusions move outputs; the pass is named beside the layers
    assert q.optimizer["by"] == ["QDQSelectorActionTransformer"]
    report = r.as_dict()
    assert report["quantized"]["departs_at"] is None and len(report["quantized"]["layers"]) == 26
    json.dumps(report)


@pytest.mark.parametrize("backend, plugin", [("ort-zero-point", ORT_PLANTED), ("openvino-zero-point", OV_PLANTED)])
def test_a_planted_zero_point_is_found_at_its_kernel(backend, plugin, capsys):
    r = fpdiff.locate("example:tinycnn", backend=backend, precision="int8", plugins=[plugin])
    q = r.quantized
    assert q.status == Status.MISMATCH and q.read_back and r.exit_code() == 1
    bad = q.departs_at
    assert bad is not None and bad["steps"] >= 3 and f"makes {bad['tensor']} " in q.reason
    # every kernel before it is within a step: the first departure is the planted one, not its consequence
    before = q.layers[:q.layers.index(bad)]
    assert all(row["steps"] <= 1 for row in before)
    answer = r.answer()
    assert answer["node"] == bad["tensor"] and answer["found_by"] == "quantized read-back"
    assert main(["locate", "example:tinycnn", "--backend", backend, "--precision", "int8", "--plugin", plugin,
                 "--no-store"]) == 1
    said = " ".join(capsys.readouterr().out.split())
    assert f"where {backend} departs: the kernel that makes {bad['tensor']}" in said


def test_openvino_reads_back_nncfs_kernels_and_a_healthy_cell_departs_nowhere():
    r = fpdiff.locate("example:tinycnn", backend="openvino", precision="int8")
    q = r.quantized
    assert q.status == Status.PASS and q.read_back and q.departs_at is None
    assert q.quantized_by.startswith("nncf ") and all(row["steps"] <= 1 for row in q.layers)


def test_where_one_layers_channels_need_their_own_scales_is_where_it_costs():
    r = fpdiff.locate(str(SPECS / "quant_channel_ranges.py"), backend="ort", precision="int8")
    q = r.quantized
    assert q.status == Status.QUANTIZATION_LOSS and r.exit_code() == 0  # the format's cost, not the backend's
    first = q.hurts_most[0]
    assert first["tensor"] == "relu" and first["recovers"] > 0.5 * q.metrics["quantization_loss"]


@pytest.mark.parametrize("kwargs, said", [
    ({"backend": "torch"}, "int8 is a quantized format and torch has no quantization path in fpdiff"),
    ({"backend": "ort", "mark_all": True}, "--mark-all locate float precisions"),
    ({"backend": "ort", "artifact": "x.onnx"}, "--artifact locate float precisions"),
    ({"backend": "ort", "device": "cuda"}, "quantized formats run on the CPU here, not cuda"),
])
def test_what_a_quantized_format_does_not_take_is_one_line(kwargs, said):
    with pytest.raises(UsageError, match=said):
        fpdiff.locate("example:tinycnn", precision="int8", **kwargs)


def test_a_cell_the_quantizer_broke_is_its_error_not_a_crash():
    # NNCF gives T5's attention mask, whose values reach float32's lowest, a scale of inf: the quantized model is
    # non-finite before any kernel runs, and no layer's recovery can be measured against a loss never reached
    t5 = Path(__file__).resolve().parents[3] / "bench" / "specs" / "corpus" / "t5.py"
    r = fpdiff.locate(str(t5), backend="openvino", precision="int8")
    q = r.quantized
    assert q.status == Status.ERROR and "a scale of 0 or inf" in q.reason and r.exit_code() == 1
    assert all(row["recovers"] is None for row in q.layers)
