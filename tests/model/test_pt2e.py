"""The PT2E program as the QDQ graph fpdiff emulates: its quantize, dequantize and choose_qparams ops computed as
torch's decomposed ops compute them (a narrowed range clamped, a run-time range per tensor or per row)."""
import numpy as np
import onnx
import pytest
import torch

from fpdiff.model import pt2e
from fpdiff.onnxtools.emulate import emulate, feeds_of

pytestmark = pytest.mark.slow  # torch.export and torch.onnx
pytest.importorskip("torchao", reason="torchao is not installed (pip install 'fpdiff[executorch]')")
import torchao.quantization.pt2e  # noqa: E402, F401  (registers the quantized_decomposed ops)

qd = torch.ops.quantized_decomposed


class Narrowed(torch.nn.Module):
    """A per-tensor quantizer with the range [-127, 127] and a run-time (dynamic) one, as PT2E writes them."""
    def forward(self, x):
        q = qd.quantize_per_tensor.default(x, 0.05, 3, -127, 127, torch.int8)
        fixed = qd.dequantize_per_tensor.default(q, 0.05, 3, -127, 127, torch.int8)
        scale, zero = qd.choose_qparams.tensor(x, -128, 127, 1e-5, torch.int8)
        q = qd.quantize_per_tensor.tensor(x, scale, zero, -128, 127, torch.int8)
        return fixed, qd.dequantize_per_tensor.tensor(q, scale, zero, -128, 127, torch.int8)


def _emulated(tmp_path, x, rows=None):
    program = torch.export.export(Narrowed(), (x,))
    pt2e.qdq_graph(program, tmp_path / "q.onnx", rows=rows)
    graph = onnx.load(str(tmp_path / "q.onnx"))
    return emulate(graph, feeds_of(graph, [x.numpy()])).outputs


def test_the_emulation_computes_what_torchs_decomposed_ops_compute(tmp_path):
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 10  # far past the narrowed range
    fixed, dynamic = _emulated(tmp_path, x)
    want_fixed, want_dynamic = (t.numpy() for t in Narrowed()(x))
    assert fixed.min() == pytest.approx((-127 - 3) * 0.05)  # clamped at quant_min, not the type's -128
    np.testing.assert_allclose(fixed, want_fixed, rtol=0, atol=1e-6)
    np.testing.assert_allclose(dynamic, want_dynamic, rtol=0, atol=1e-5)


def test_a_run_time_range_per_row_is_each_rows_own(tmp_path):
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(1)) * torch.tensor([[0.01], [0.1], [1.0], [10.0]])
    _, per_row = _emulated(tmp_path, x, rows=[1])
    _, per_tensor = _emulated(tmp_path, x)
    small = lambda y: float(np.abs(y[0] - x[0].numpy()).max())  # noqa: E731  (the row with the smallest values)
    assert small(per_row) < 1e-4 < small(per_tensor)  # its own range keeps it; the tensor's rounds it to zero


def test_rows_for_quantizers_the_program_lacks_are_the_emulations_error(tmp_path):
    from fpdiff.core.errors import StageError
    with pytest.raises(StageError, match="2 of the program's 3 dynamic quantizers"):
        _emulated(tmp_path, torch.randn(4, 16), rows=[1, 1, 1])


class Sine(torch.nn.Module):
    """No op a PT2E quantizer annotates: the program it makes is the float one."""
    def forward(self, x):
        return torch.cos(torch.sin(x))


def test_a_program_the_quantizer_left_wholly_float_is_unsupported_before_any_lowering():
    pytest.importorskip("executorch", reason="executorch is not installed")
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    from fpdiff.core.errors import QUANTIZED_NONE, Unsupported
    x = torch.randn(2, 3)
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    with pytest.raises(Unsupported, match=QUANTIZED_NONE) as e:
        pt2e.quantize(torch.export.export(Sine(), (x,)), quantizer, [(x,)], (x,))
    assert e.value.stage == "quantize"
    linear = torch.nn.Linear(3, 4).eval()
    quantized = pt2e.quantize(torch.export.export(linear, (x,)), quantizer, [(x,)], (x,))
    assert any("quantize" in str(n.target) for n in quantized.graph.nodes)
