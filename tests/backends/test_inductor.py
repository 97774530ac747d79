"""Inductor's quantized cells: the program quantized with torchao's X86InductorQuantizer through PT2E, compiled with
freezing (oneDNN's integer kernels), judged against float64 and the exact emulation of the quantized program."""
import pytest

import fpdiff
from fpdiff.core.status import Status

pytest.importorskip("torchao", reason="torchao is not installed (pip install 'fpdiff[executorch]')")
pytestmark = pytest.mark.slow  # real quantization and compiles


def test_a_cnn_runs_in_onednns_integer_kernels_and_matches_the_emulation():
    r = fpdiff.quant("example:tinycnn", schemes=["int8", "int8-dynamic", "fp8"], backends=["inductor"])
    cells = {c.precision: c for c in r.cells}
    static, dynamic = cells["int8"], cells["int8-dynamic"]
    assert static.status == Status.PASS and static.metrics["departure"] < 1e-6, static.reason
    assert static.info["integer_ops"] == {"qconv (oneDNN)": 3, "qlinear (oneDNN)": 1} and static.info["float_ops"] == 0
    # dynamic quantization is the linear layers' only: the convs stay float, and the cell says so
    assert dynamic.status == Status.PASS and dynamic.info["integer_ops"] == {"qlinear (oneDNN)": 1}
    assert any(f.kind == "left-float" and "3 of the program's 4" in f.message for f in dynamic.findings)
    assert cells["fp8"].status == Status.UNSUPPORTED and "X86InductorQuantizer" in cells["fp8"].reason


def test_a_fused_residual_add_that_writes_into_the_input_is_said_and_judged_on_its_first_call():
    # findings/quant-003: inductor fuses linear + residual add into oneDNN's sum post-op, in place into the
    # caller's input; the numbers of the call are right, the caller's tensor is not
    r = fpdiff.quant("example:tinyformer", schemes=["int8"], backends=["inductor"])
    (c,) = r.cells
    assert c.status == Status.PASS and c.metrics["departure"] < 1e-6, c.reason
    (f,) = [f for f in c.findings if f.kind == "inputs-overwritten"]
    assert "input 0" in f.message
    assert r.exit_code() == 0 and r.exit_code(strict=True) == 1
