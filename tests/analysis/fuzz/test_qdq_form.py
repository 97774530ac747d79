"""The fuzzer's qdq form: the ONNX graph quantized by ONNX Runtime's quantizer on its own inputs, its float32 graph
the twin, judged against the quantized graph's exact emulation; a graph the quantizer leaves float is discarded."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from fpdiff import api
from fpdiff.analysis.fuzz import oracle
from fpdiff.analysis.fuzz.generate import generate
from fpdiff.analysis.fuzz.graph import ONNX, QDQ, Sample
from fpdiff.core.errors import UsageError
from fpdiff.onnxtools.emulate import file_format


def _quantizable(form: str = QDQ) -> Sample:
    """The first seed whose graph holds an op ONNX Runtime's quantizer quantizes."""
    for seed in range(200):
        s = generate(seed, ops=["matmul", "add", "relu", "conv2d", "mul"], form=form)
        if isinstance(s, Sample):
            return s
    raise AssertionError("no graph of those ops in 200 seeds")


def test_a_qdq_graph_is_the_onnx_graph_quantized_on_its_own_inputs():
    s = _quantizable()
    assert s.form == QDQ and s.id != _quantizable(ONNX).id  # the form is part of the id
    case = oracle.case_of(s)
    p = case.payload
    assert p.quantized and file_format(p.model) == "int8"
    assert p.float_model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert all(np.asarray(v).dtype != np.float64 for v in p.inputs.values())
    assert not case.integer_valued


def test_generate_takes_the_qdq_form_and_refuses_an_unknown_one():
    assert isinstance(generate(3, form=QDQ), Sample)
    with pytest.raises(UsageError, match="qdq"):
        generate(3, form="int8")


@pytest.mark.slow
def test_a_qdq_campaign_on_onnx_runtime_finds_nothing(tmp_path):
    """ONNX Runtime runs the graphs its own quantizer made as their emulation says (no op here gives the quantizer
    an infinite range: the attention ops mask with -inf, whose inf scale is the quantizer's error)."""
    r = api.fuzz(backends=["ort"], graphs=10, seed=2, forms=["qdq"], repro_dir=str(tmp_path),
                 ops=["add", "relu", "sigmoid", "mul", "conv2d"])
    d = r.as_dict()
    assert not r.findings, [f.as_dict() for f in r.findings]
    assert {rec.form for rec in r.records} == {"qdq"}
    tested = r.tested()
    assert tested, d["discarded"]
    assert all(set(rec.statuses.values()) <= {"pass", "quantization-loss"} for rec in tested), \
        [rec.statuses for rec in tested]
