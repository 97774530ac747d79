"""Core ML: the conversion's effects on numbers are findings here; prediction needs a Mac worker."""
import sys

import pytest

import fpdiff
from conftest import SPECS
from fpdiff.core.status import Status

pytest.importorskip("coremltools", reason="coremltools is not installed (pip install coremltools)")
pytestmark = pytest.mark.slow  # real conversions: make test, not make test-fast


def test_float16_conversion_reports_what_changes_numbers():
    r = fpdiff.check(str(SPECS / "coreml_fp16_hazards.py"), backends=["coreml"], precisions=["fp32", "fp16", "bf16"])
    c = {x.precision: x for x in r.cells}
    fp16 = {f.kind: f.message for f in c["fp16"].findings}
    assert "64 nonzero weight or constant values are below fp16's smallest subnormal" in fp16["underflow"]
    assert "rms_norm (coreml_fp16_hazards.py:" in fp16["decomposed"] and "reduce_mean" in fp16["decomposed"]
    assert c["fp16"].op_dtypes == {"float16": sum(c["fp16"].op_dtypes.values())}
    assert not [f for f in c["fp16"].findings if f.kind == "dtype-changed"]  # every op in fp16: nothing changed
    assert not {"underflow", "decomposed"} & {f.kind for f in c["fp32"].findings}  # FLOAT32 changes none of it
    assert c["bf16"].status == Status.UNSUPPORTED and "fp32 or fp16" in c["bf16"].reason
    if sys.platform != "darwin":
        for p in ("fp32", "fp16"):
            assert c[p].status == Status.UNSUPPORTED and "predicts only on macOS" in c[p].reason
    else:
        assert c["fp32"].status == Status.PASS


def test_the_users_mlpackage_is_read_here_and_predicted_on_a_mac(tmp_path):
    """A user's FLOAT16 .mlpackage: its precision and op dtypes are read from the program on any OS; its numbers
    need macOS, said in one line."""
    import coremltools as ct
    import torch

    from fpdiff.sources import load
    s = load("example:tinycnn")
    program = torch.export.export(s.module.eval(), tuple(s.inputs)).run_decompositions({})
    ct.convert(program, convert_to="mlprogram", skip_model_load=True,
               compute_precision=ct.precision.FLOAT16).save(str(tmp_path / "model.mlpackage"))
    r = fpdiff.check("example:tinycnn", backends=["torch"], precisions=["fp32"], repeat=1,
                     artifacts=[f"coreml={tmp_path / 'model.mlpackage'}"])
    c = next(x for x in r.cells if x.backend == "coreml")
    assert c.precision == "fp16" and "float16" in c.info["artifact_precision"]
    assert c.op_dtypes and c.op_dtypes.get("float16", 0) == sum(c.op_dtypes.values())
    if sys.platform == "darwin":
        assert c.status == Status.PASS, c.reason
    else:
        assert c.status == Status.UNSUPPORTED and "predicts only on macOS" in c.reason
