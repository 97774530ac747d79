"""plan on ONNX models: mixed graphs run by ONNX Runtime, judged by the float64 reference evaluator."""
import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

import fpdiff
from conftest import HERE
from fpdiff.errors import UsageError
from fpdiff.export import export_program
from fpdiff.sources import load

PADDED = HERE.parent / "bench" / "specs" / "padded_encoder.py"


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """The padded encoder as ONNX: -3.4e38 mask constant (-inf in fp16, 0*-inf = NaN) and an eps of 1e-8 (0)."""
    d = tmp_path_factory.mktemp("padded")
    s = load(str(PADDED))
    export_program(torch.export.export(s.module, s.inputs, strict=False), d / "m.onnx")
    names = [i.name for i in onnx.load(str(d / "m.onnx")).graph.input]
    np.savez(d / "inputs.npz", **{n: t.numpy() for n, t in zip(names, s.inputs)})
    return d


def test_lost_constants_are_kept_in_fp32_and_the_plan_verified(padded, tmp_path):
    out = tmp_path / "planned.onnx"
    p = fpdiff.plan(str(padded / "m.onnx"), backend="ort", inputs=str(padded / "inputs.npz"), export_onnx=str(out))
    assert p.pure_error == float("inf") and p.passed and p.error <= p.tolerance
    assert sorted(k["op"] for k in p.keep) == ["Add", "Mul"] and p.evaluations <= 6
    why = " ".join(w for k in p.keep for w in k["why"])
    assert "-inf in fp16" in why  # the mask constant
    assert p.fp32_error is None or p.fp32_error < 1e-6
    assert p.export["verified"] and onnx.load(str(out)).graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT


def test_every_op_kept_is_fp32_again(padded):
    import onnxruntime as ort

    from fpdiff.onnx_mixed import to_mixed
    from fpdiff.plan_onnx import float64_run, follow_moves, named, unit_names
    m = named(onnx.load(str(padded / "m.onnx")))
    feeds = dict(np.load(padded / "inputs.npz"))
    values = float64_run(m, feeds)
    exp = values[m.graph.output[0].name]
    mixed = to_mixed(m, TensorProto.FLOAT16, follow_moves(m, set(unit_names(m, values))))
    out = ort.InferenceSession(mixed.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.linalg.norm(out - exp) / np.linalg.norm(exp) < 1e-5  # Transposes of weights and kept ops stay fp32
    without = to_mixed(m, TensorProto.FLOAT16, set(unit_names(m, values)))
    out = ort.InferenceSession(without.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert np.linalg.norm(out - exp) / np.linalg.norm(exp) > 1e-5  # what following the moves is for


def test_other_backends_and_foreign_plans_are_refused(padded, tmp_path):
    with pytest.raises(UsageError, match="ONNX Runtime"):
        fpdiff.plan(str(padded / "m.onnx"), backend="iree", inputs=str(padded / "inputs.npz"))
    path = tmp_path / "plan.json"
    fpdiff.plan("example:rmsnorm", save=str(path), measure_speed=False)
    with pytest.raises(UsageError, match="made for example:rmsnorm"):
        fpdiff.plan(str(padded / "m.onnx"), backend="ort", inputs=str(padded / "inputs.npz"), load=str(path))
