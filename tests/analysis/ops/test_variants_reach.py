"""What the default variants reach given only an op family: ties with one answer beyond argmax (value-only
selections, picks where the tie's index is open, scatter reductions with repeated targets), per-channel parameters
whose length is another axis's too, weighted loss reductions, integer dtypes, index ops' static/dynamic mixes, and a
non-trivial sample past a trivial first. Every case has one answer by its op's spec."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fpdiff.analysis.ops import torch_catalog, variants
from fpdiff.analysis.ops.case import ONNX_CATALOG, SAMPLE, TORCH_CATALOG, Case, OnnxSample

DEFAULT = variants.select(["default"])


def _default_extras(pattern: str) -> list[Case]:
    return variants.extra_cases(DEFAULT, [pattern])


def _by(cases: list[Case], case_id: str) -> Case:
    return next(c for c in cases if c.case_id == case_id)


@pytest.fixture(scope="module")
def ties() -> list[Case]:
    return variants.extra_cases(["ties"], None)


def test_default_makes_each_class_from_an_op_family_alone():
    """The brief's examples, given only the op's name: a tie case for max with indices and for amax, an integer
    case for amax, a weighted nll_loss mean, a C = W PRelu slope, a repeated-target scatter mean."""
    assert {"ties", "int-dtypes"} <= {c.variant for c in _default_extras("amax")}
    assert any(c.variant == "ties" for c in _default_extras("max.reduction_with_dim"))
    assert any(c.variant == "ties" and "picks" in c.description for c in _default_extras("*max_pool2d"))
    both = _default_extras("*nll_loss")  # torch's name selects ONNX's NegativeLogLikelihoodLoss too
    nll = [c for c in both if c.op == "nn.functional.nll_loss" and "weight" in c.payload.kwargs]
    assert any(c.payload.kwargs.get("reduction") == "mean" for c in nll)
    assert any(c.op == "NegativeLogLikelihoodLoss" and c.variant == "optional-inputs" for c in both)
    assert any(c.variant == "optional-inputs" for c in _default_extras("NegativeLogLikelihoodLoss"))
    assert any(c.variant == "axes" and "C = 4" in c.description for c in _default_extras("PRelu"))
    assert any(c.variant == "ties" and "repeated" in c.description for c in _default_extras("scatter_reduce.mean"))


def test_picks_have_one_answer(ties):
    """Where the tie's index is open, the case compares the input at the index: equal to the values for any index
    a tie allows, and the input does hold ties."""
    picks = [c for c in ties if "picks" in c.description or "any tied index" in c.description]
    assert {c.op for c in picks} >= {"topk", "kthvalue", "median", "mode", "cummax", "sort",
                                     "nn.functional.max_pool2d", "MaxPool"}
    for c in picks:
        values, picked = variants.outputs(c)[:2]
        np.testing.assert_array_equal(values, picked)
        x = c.payload.args[0].numpy() if c.catalog == TORCH_CATALOG else c.payload.inputs["X"]
        assert variants.has_ties([x]), c.case_id


def test_picks_tell_a_wrong_index():
    """An index off the selected element picks another value: the picks output is what catches it."""
    m = variants._tie_matrix(np.random.default_rng(0), 4, 6)
    x = torch.from_numpy(m)
    values, picked = variants.picks(x, "torch.topk", dim=1, k=3)
    wrong = torch.gather(x, 1, torch.zeros_like(torch.topk(x, 3, dim=1).indices))
    assert torch.equal(values, picked) and not torch.equal(picked, wrong)


def test_mode_rows_have_one_mode():
    m = variants._mode_matrix(np.random.default_rng(1), 5, 6)
    for row in m:
        _, counts = np.unique(row, return_counts=True)
        assert counts.max() == 3 and (counts == 3).sum() == 1


def test_open_tie_indices_never_derive(ties):
    """The snapped catalog samples stay with ops whose whole output is fixed by the spec: no index a tie leaves
    open (max_pool2d's return_indices, topk, kthvalue, mode) is ever compared as is."""
    assert not {"topk", "kthvalue", "mode", "median", "cummax", "nn.functional.max_pool2d"} & set(variants._TIE_TORCH)
    assert not {"MaxPool"} & set(variants._TIE_ONNX)
    x = torch.tensor([[0.5, 1.0, 1.0, -0.5]], dtype=torch.float64)
    case = Case(TORCH_CATALOG, "amax", "amax#0", SAMPLE, "", payload=torch_catalog.TorchSample("torch.amax", (x,),
                                                                                                {"dim": 1}))
    (made,) = variants.VARIANTS["ties"].apply(case)
    assert made.variant == "ties"


def test_collisions_repeat_targets_and_leave_overwrite_out(ties):
    scatters = [c for c in ties if "repeated" in c.description or "repeats" in c.description]
    assert {c.op for c in scatters} >= {"scatter_reduce.mean", "scatter_add", "index_add", "index_put",
                                        "ScatterElements", "ScatterND"}
    assert all("reduction=none" not in c.description for c in scatters)
    mean = next(c for c in scatters if c.op == "scatter_reduce.mean" and "include_self=False" in c.description)
    index, src = mean.payload.kwargs["index"], mean.payload.kwargs["src"]
    assert all(len(set(col.tolist())) < len(col) for col in index.T)  # every column repeats a target
    x = mean.payload.args[0]
    overwrite = x.scatter_reduce(0, index, src, "amax", include_self=False)
    assert not np.allclose(variants.outputs(mean)[0], overwrite.numpy())


def _prelu_reading(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, x * slope)


def test_aliased_parameters_have_two_readings_that_differ():
    """C = W: a per-channel slope read along W (and the other way round) fits the shape and gives other numbers,
    so the reading the spec fixes is the only right answer."""
    axes = variants.extra_cases(["axes"], None)
    onnx_w = next(c for c in axes if c.op == "PRelu" and c.payload.inputs["P"].shape == (4,))
    x, p = onnx_w.payload.inputs["X"].astype(np.float64), onnx_w.payload.inputs["P"].astype(np.float64)
    assert x.shape[1] == x.shape[-1] == p.size
    got = variants.outputs(onnx_w)[0]
    np.testing.assert_allclose(got, _prelu_reading(x, p), rtol=1e-6)  # numpy broadcasting: along W
    assert not np.allclose(got, _prelu_reading(x, p[:, None, None]))  # the per-channel reading differs
    torch_c = next(c for c in axes if c.op == "nn.functional.prelu")
    xt, wt = torch_c.payload.args[0].numpy(), torch_c.payload.kwargs["weight"].numpy()
    got = variants.outputs(torch_c)[0]
    np.testing.assert_allclose(got, _prelu_reading(xt, wt[:, None, None]), rtol=1e-12)  # torch: per channel
    assert not np.allclose(got, _prelu_reading(xt, wt))


def test_weighted_mean_divides_by_the_targets_weights():
    opt = variants.extra_cases(["optional-inputs"], None)
    c = next(c for c in opt if c.op == "nn.functional.nll_loss" and c.payload.kwargs.get("reduction") == "mean"
             and c.payload.args[0].dim() == 2)
    lp, t, w = c.payload.args[0].numpy(), c.payload.args[1].numpy(), c.payload.kwargs["weight"].numpy()
    terms = -lp[np.arange(len(t)), t] * w[t]
    (got,) = variants.outputs(c)
    np.testing.assert_allclose(got, terms.sum() / w[t].sum(), rtol=1e-12)
    assert not np.isclose(got, terms.sum() / len(t))  # the count of targets would be another answer
    onnx = next(c for c in opt if c.op == "NegativeLogLikelihoodLoss" and "ignore_index" in c.description)
    feeds = onnx.payload.inputs
    keep = feeds["T"] != variants.LOSS_IGNORE
    t, w = feeds["T"][keep], feeds["W"].astype(np.float64)
    want = (-feeds["X"].astype(np.float64)[keep][np.arange(t.size), t] * w[t]).sum() / w[t].sum()
    np.testing.assert_allclose(variants.outputs(onnx)[0], want, rtol=1e-6)


def test_plainest_logsumexp_form():
    plain = [c for c in variants.extra_cases(["optional-inputs"], ["logsumexp", "ReduceLogSumExp"])
             if "plainest" in c.description]
    assert {c.catalog for c in plain} == {TORCH_CATALOG, ONNX_CATALOG}


def test_int_dtypes_keep_their_dtype_and_edges():
    ints = variants.extra_cases(["int-dtypes"], None)
    dtypes = {str(t.dtype) for c in ints if c.catalog == TORCH_CATALOG for t in variants._tensor_leaves(c.payload)}
    assert dtypes == {"torch.uint8", "torch.int8", "torch.int32"}
    assert {np.asarray(a).dtype.name for c in ints if c.catalog == ONNX_CATALOG for a in c.payload.inputs.values()} \
        == {"uint8", "int8", "int32"}
    amax = next(c for c in ints if c.op == "amax" and c.payload.args[0].dtype == torch.int32)
    x = amax.payload.args[0].numpy()
    (got,) = variants.outputs(amax)
    np.testing.assert_array_equal(got, x.max(axis=1))
    # fp32 merges neighbours past 2^24: a backend computing in it would give another answer
    assert not np.array_equal(x.astype(np.float32).astype(np.int64), x.astype(np.int64))
    u8 = next(c for c in ints if c.op == "amax" and c.payload.args[0].dtype == torch.uint8).payload.args[0].numpy()
    assert u8.max() > 127  # read as int8 these would be negative
    for c in ints:
        assert all(o.dtype.kind in "iu" for o in variants.outputs(c)), c.case_id  # judged exactly, by flips


def test_mixed_index_only_for_index_ops():
    v = variants.VARIANTS["mixed-index"]
    x = torch.randn(6, 4, dtype=torch.float64)
    index = torch.tensor([[0, 1, 2, 3], [5, 4, 3, 2]])
    gather = Case(TORCH_CATALOG, "gather", "gather#0", SAMPLE, "", payload=torch_catalog.TorchSample(
        "torch.gather", (x,), {"dim": 0, "index": index}))
    (made,) = v.apply(gather)
    assert made.variant == "mixed-index" and made.payload.dynamic
    mm = Case(TORCH_CATALOG, "mm", "mm#0", SAMPLE, "", payload=torch_catalog.TorchSample("torch.mm", (x, x.T)))
    assert v.apply(mm) == []
    feeds = {"X": np.ones((3, 4), np.float32)}
    model = variants._one_node("Gather", ["X", "idx"], {"axis": 1}, feeds, [variants._i64("idx", [2, 0])])
    onnx_case = Case(ONNX_CATALOG, "Gather", "test_gather", SAMPLE, "", payload=OnnxSample(model, feeds))
    made = v.apply(onnx_case)
    assert len(made) == 2 and all(c.variant == "mixed-index" for c in made)  # X's two dims, one at a time


def test_deep_samples_is_one_more_sample():
    assert variants.DEEP_SAMPLES == 1
