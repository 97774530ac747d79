"""The fuzzer's quantize form: the torch program quantized by each backend's own quantizer (the op sweep's quantize
variant), its inputs after the first held as parameters; a graph every quantizer leaves float is discarded."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fpdiff import api
from fpdiff.analysis.fuzz import oracle
from fpdiff.analysis.fuzz.emit import held_as_weights, torch_case
from fpdiff.analysis.fuzz.generate import generate
from fpdiff.analysis.fuzz.graph import FLOAT, QUANTIZE, TORCH, Graph, Sample
from fpdiff.analysis.ops.case import OpsCell
from fpdiff.analysis.ops.quantized_cases import BY_BACKEND
from fpdiff.analysis.ops.sweep import CaseOutcome, SweepConfig
from fpdiff.backends import registry
from fpdiff.core.errors import QUANTIZED_NONE, UsageError


def _conv(weight: float, padding: int, stride: int) -> Sample:
    """One conv2d of a (2, 1, 1, 1) input by a 1x1 weight (the program's parameter): the minimized graph of the
    fuzz finding quant-019/020 (the weight near fp16's max, padding and stride that leave every output zero)."""
    g = Graph.from_dict({"inputs": [{"shape": [2, 1, 1, 1], "range": "positive"}, {"shape": [1, 1, 1, 1]}],
                         "nodes": [{"op": "conv2d", "args": [0, 1], "attrs": {"dilation": 1, "groups": 1,
                                                                               "padding": padding, "stride": stride}}],
                         "output": 2})
    values = (np.array([0.0112, 0.0714]).reshape(2, 1, 1, 1), np.full((1, 1, 1, 1), weight))
    return Sample(g, values, QUANTIZE)


def test_a_quantize_graph_is_the_sweeps_quantize_variant_with_its_weights_held():
    s = _conv(0.5, 0, 1)
    case = oracle.case_of(s)
    assert case.variant == BY_BACKEND and not case.integer_valued
    assert held_as_weights(s) == (1,)
    assert torch_case(s).payload.params == (1,)
    assert held_as_weights(s.with_(form=TORCH)) == ()  # a plain torch graph feeds every input
    assert s.id != s.with_(form=TORCH).id


def test_a_minimized_quantize_graph_is_judged_again_as_quantized_whatever_variant_it_shows():
    """The repro step names a minimized graph's variant (its layout, its magnitudes); a quantize graph stays the
    quantize variant, or it would be judged as a float case and read as passing."""
    s = _conv(0.5, 0, 1)
    assert oracle.case_of(s, shown="channels-last").variant == BY_BACKEND
    assert oracle.case_of(s.with_(form=TORCH), shown="channels-last").variant == "channels-last"


def test_only_float_inputs_after_the_first_are_held():
    for seed in range(40):
        s = generate(seed, form=QUANTIZE)
        if isinstance(s, Sample):
            floats = [k for k, x in enumerate(s.graph.inputs) if x.type.dtype == FLOAT]
            assert held_as_weights(s) == tuple(floats[1:])


def test_a_graph_every_quantizer_left_float_is_discarded_and_one_left_float_by_one_is_not():
    case = oracle.case_of(_conv(0.5, 0, 1))
    none = OpsCell.of(case, "executorch", "int8", "static", "unsupported",
                      reason=f"XNNPACKQuantizer {QUANTIZED_NONE} in int8: the graph it made holds no quantized tensor")
    other = OpsCell.of(case, "litert", "int8", "static", "unsupported", reason="the converter refused BATCH_MATMUL")
    assert oracle.quantized_none([none, none]) and not oracle.quantized_none([none, other])
    assert not oracle.quantized_none([])


def test_the_quantize_form_needs_a_backend_that_quantizes_torch_programs():
    with pytest.raises(UsageError, match="quantize"):
        api.fuzz(backends=["torch"], graphs=1, forms=["quantize"])


@pytest.mark.slow
def test_executorch_refuses_at_load_the_conv_its_partitioner_delegated(tmp_path: Path):
    """findings/quant-019: a conv whose requantization scale XNNPACK refuses (every output zero, the weight large)
    lowers without a word and fails to load; the same conv with a moderate weight and real outputs matches its
    emulation, in integer kernels."""
    reg = registry()
    config = SweepConfig(backends=("executorch",), precisions=("fp32",), timeout=300)
    bad, _, _ = oracle.judge(_conv(18200.0, 1, 2), config, reg, tmp_path / "bad")
    assert bad.outcome == oracle.FAILING, bad.statuses
    assert "Failed to load method" in bad.failures[0].reason
    good, outcome, _ = oracle.judge(_conv(0.5, 0, 1), config, reg, tmp_path / "good")
    assert good.outcome == oracle.PASS and good.statuses == {"executorch/int8": "pass"}, outcome.cells[0].reason
    assert isinstance(outcome, CaseOutcome) and outcome.cells[0].support == "native"
