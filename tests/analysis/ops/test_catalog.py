"""The op catalogs over the real OpInfo database and ONNX node tests: selection, skips, integer-valued outputs, and
cases written as model files that fpdiff's loaders take and that compute what the op computes."""
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch.utils import _pytree as pytree

from fpdiff.analysis.ops import catalog, onnx_catalog, torch_catalog
from fpdiff.analysis.ops.case import CHANNELS_LAST, TRANSPOSED, Case, TorchSample
from fpdiff.analysis.ops.catalog import write_case
from fpdiff.core.errors import UsageError
from fpdiff.sources import load


def _case(cases: list[Case], case_id: str) -> Case:
    return next(c for c in cases if c.case_id == case_id)


def _flat(out) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _direct(case: Case):
    """The op called on the sample's own arguments, outside any model."""
    p = case.payload
    return torch_catalog.resolve(p.fn)(*p.args, **p.kwargs)


def _written(case: Case, folder, **changes):
    """The case with payload changes, written and loaded as fpdiff loads a spec."""
    variant = "-".join(f"{k}" for k in changes) or case.variant
    spec, none = write_case(replace(case, variant=variant, payload=replace(case.payload, **changes)), folder)
    assert none is None
    return load(spec)


@pytest.fixture(scope="module")
def pools():
    return catalog.select(["torch", "onnx"], ["*avg_pool*", "*averagepool*"])


def test_a_family_pattern_selects_every_avg_pool_of_both_catalogs(pools):
    cases, skipped = pools
    ops = {c.op for c in cases}
    assert {"nn.functional.avg_pool1d", "nn.functional.avg_pool2d", "nn.functional.avg_pool3d",
            "AveragePool"} <= ops
    assert all("avg_pool" in o or "averagepool" in o.lower() for o in ops)
    assert not skipped
    per_op = {o: [c for c in cases if c.op == o] for o in ops}
    assert all(1 <= len(v) <= 2 for v in per_op.values())  # samples=2 by default
    keys = [(c.catalog, c.op) for c in cases]
    assert keys == sorted(keys)
    assert len({c.case_id for c in cases}) == len(cases)
    pool = _case(cases, "nn.functional.avg_pool2d#0")
    assert pool.description.startswith("f64[") and pool.family == "pool"


def test_a_torch_name_selects_the_onnx_op_of_another_spelling_too():
    """'*nll_loss' is NegativeLogLikelihoodLoss in ONNX, 'amax' its ReduceMax: an op family given once selects both."""
    cases, _ = catalog.select(["torch", "onnx"], ["*nll_loss", "amax"])
    assert {"nn.functional.nll_loss", "NegativeLogLikelihoodLoss", "amax", "ReduceMax"} <= {c.op for c in cases}
    assert not {c.op for c in cases} & {"ReduceMin", "SoftmaxCrossEntropyLoss", "nn.functional.cross_entropy"}


def test_the_same_call_gives_the_same_cases(pools):
    again, _ = catalog.select(["torch"], ["nn.functional.avg_pool2d"])
    first = [c for c in pools[0] if c.op == "nn.functional.avg_pool2d"]
    assert [c.case_id for c in again] == [c.case_id for c in first]
    assert all(torch.equal(a.payload.args[0], b.payload.args[0]) for a, b in zip(again, first))


def test_an_unknown_pattern_names_the_closest_ops():
    with pytest.raises(UsageError, match="avgpool2.*nn.functional.avg_pool2d"):
        catalog.select(["torch", "onnx"], ["avgpool2"])
    with pytest.raises(UsageError, match="closest: AveragePool"):
        catalog.select(["onnx"], ["AvgPool*"])


def test_an_unknown_catalog_lists_the_known_ones():
    with pytest.raises(UsageError, match="unknown catalog 'tflite'.*torch, onnx"):
        catalog.select(["tflite"], None)


def test_random_ops_are_skipped_with_their_reason():
    cases, skipped = torch_catalog.cases(["nn.functional.dropout", "bernoulli", "empty_like", "nn.functional.relu"])
    reasons = {s["op"]: s["reason"] for s in skipped}
    assert set(reasons) == {"nn.functional.dropout", "bernoulli", "empty_like"}
    assert all(r.startswith(torch_catalog.RANDOM) for r in reasons.values())
    assert {c.op for c in cases} == {"nn.functional.relu"}  # a deterministic op beside them is kept


def test_rounding_ops_are_integer_valued_and_others_not():
    cases, _ = torch_catalog.cases(["round", "floor", "nn.functional.avg_pool2d", "add"])
    for c in cases:
        assert c.integer_valued == (c.op in ("round", "floor")), c.case_id
    onnx_cases, _ = onnx_catalog.cases(["Round", "Floor", "Relu"])
    assert {c.op for c in onnx_cases if c.integer_valued} == {"Round", "Floor"}


def test_a_written_torch_case_computes_the_op_in_float64(tmp_path):
    cases, _ = torch_catalog.cases(["nn.functional.avg_pool2d", "max.reduction_with_dim", "lt", "cat"])
    assert {c.op for c in cases} == {"nn.functional.avg_pool2d", "max.reduction_with_dim", "lt", "cat"}
    for case in cases:
        src = load(write_case(case, tmp_path / case.op)[0])
        assert all(t.dtype != torch.float32 for t in src.inputs)
        got, want = _flat(src.module(*src.inputs)), _flat(_direct(case))
        assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want)), case.case_id
        if case.op == "cat":  # a list argument's tensors are inputs each, named by where they sit
            assert src.input_names == ["input_0", "input_1"]


def test_a_dotted_callable_is_a_case_too(tmp_path):
    x, w = torch.randn(2, 3, 9, dtype=torch.float64), torch.randn(4, 3, 3, dtype=torch.float64)
    case = Case("torch", "conv1d", "conv1d#0", payload=TorchSample("torch.nn.functional.conv1d", (x, w),
                                                                   {"padding": 1}))
    src = load(write_case(case, tmp_path)[0])
    assert src.input_names == ["input", "arg1"]
    assert torch.equal(src.module(*src.inputs), torch.nn.functional.conv1d(x, w, padding=1))
    with pytest.raises(UsageError, match="cannot resolve op"):
        torch_catalog.resolve("torch.nn.functional.no_such_op")


def _spy(op, seen: list):
    """The op, noting how its input is laid out in memory when it is called."""
    def call(x, *args, **kwargs):
        seen.append((x.is_contiguous(), x.is_contiguous(memory_format=torch.channels_last)))
        return op(x, *args, **kwargs)
    return call


def test_layouts_keep_the_values_and_transposed_hands_the_op_a_strided_view(tmp_path):
    cases, _ = torch_catalog.cases(["nn.functional.conv2d"], samples=1)
    case = cases[0]
    want = _flat(_direct(case))[0]
    for layout in (CHANNELS_LAST, TRANSPOSED):
        src = _written(case, tmp_path / layout, layout=layout)
        seen: list = []
        src.module.fn = _spy(src.module.fn, seen)
        torch.testing.assert_close(src.module(*src.inputs), want, rtol=1e-12, atol=1e-12)
        if layout == TRANSPOSED:
            assert seen == [(False, False)]
            assert src.inputs[0].is_contiguous() and not torch.equal(src.inputs[0], case.payload.args[0])
        else:
            assert seen == [(False, True)]


def test_a_transposed_input_with_a_size_1_dim_has_canonical_strides():
    """`.contiguous()` leaves a size-1 dim's stride as the transpose made it, which export reads as a permuted dim
    order; the case's input is laid out as any contiguous tensor of its shape is."""
    x = torch.arange(4.0, dtype=torch.float64).reshape(2, 1, 2, 1)
    (t,) = torch_catalog.case_tensors(TorchSample(fn="torch.neg", args=(x,), layout=TRANSPOSED))
    assert t.shape == (2, 1, 1, 2) and t.stride() == torch.empty(2, 1, 1, 2).stride()
    assert torch.equal(t, x.transpose(-1, -2))


@pytest.mark.slow
def test_dynamic_dims_export_and_run_at_another_size(tmp_path):
    cases, _ = torch_catalog.cases(["add", "nn.functional.avg_pool2d"])
    add = next(c for c in cases if c.op == "add" and c.payload.args[0].dim() == 3)
    src = _written(add, tmp_path / "add", dynamic=((0, 2), (0, 2)))
    spec = src.dynamic_shapes
    assert spec["input"][0] is spec["arg1"][0]  # equal dims of the two operands share one Dim
    ep = torch.export.export(src.module, src.inputs, dynamic_shapes=spec, strict=False)
    bigger = tuple(torch.randn(7, t.shape[1], 9, dtype=torch.float64) for t in src.inputs)
    assert torch.equal(ep.module()(*bigger), bigger[0] + bigger[1])

    pool = _case(cases, "nn.functional.avg_pool2d#0")
    src = _written(pool, tmp_path / "pool", dynamic=((0,),), layout=TRANSPOSED)
    ep = torch.export.export(src.module, src.inputs, dynamic_shapes=src.dynamic_shapes, strict=False)
    torch.testing.assert_close(ep.module()(*src.inputs), _direct(pool))
    for dtype in (torch.float32, torch.float16, torch.bfloat16):  # the grid's precisions export as well
        torch.export.export(src.module, tuple(t.to(dtype) for t in src.inputs), dynamic_shapes=src.dynamic_shapes,
                            strict=False)


def test_a_written_onnx_case_loads_and_matches_its_expected_output(tmp_path):
    from fpdiff.onnxtools.graph import float64_values
    cases, skipped = onnx_catalog.cases(["AveragePool", "Softmax", "Round", "Gemm"])
    assert {c.op for c in cases} == {"AveragePool", "Softmax", "Round", "Gemm"} and not skipped
    for case in cases:
        model, npz = write_case(case, tmp_path)
        src = load(model, inputs=npz, keep_opset=True)
        assert list(src.input_names) == list(case.payload.inputs)
        got = float64_values(src.module, dict(zip(src.input_names, src.inputs)), intermediate=False)
        for g, e in zip(got, case.payload.expected, strict=True):
            assert g.dtype == np.float64
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=case.case_id)  # float32 expectations


def test_onnx_skips_say_why():
    _, skipped = onnx_catalog.cases(["Bernoulli", "ai.onnx.preview.training.*", "StringNormalizer"])
    reasons = {s["op"]: s["reason"] for s in skipped}
    assert reasons["Bernoulli"] == "random or nondeterministic op"
    assert reasons["ai.onnx.preview.training.Adam"] == "training-domain op"
    assert reasons["StringNormalizer"].startswith("object data")
