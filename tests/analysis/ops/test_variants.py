"""The variant generators on real catalog cases (OpInfo) and hand-made ONNX graphs: ids distinct and stable, values
the same for a seed, float64 outputs finite, layouts and dims that load and export, SEEDS #3's exact answer."""
from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
import torch
from onnx import helper

from fpdiff.analysis.ops import torch_catalog, variants
from fpdiff.analysis.ops.case import CHANNELS_LAST, ONNX_CATALOG, SAMPLE, TORCH_CATALOG, TRANSPOSED, Case, OnnxSample
from fpdiff.analysis.ops.catalog import write_case
from fpdiff.core.errors import UsageError

OPS = ["softmax", "log", "add", "nn.functional.conv2d", "sum", "mm", "exp", "nn.functional.layer_norm", "cumsum",
       "sqrt", "nn.functional.avg_pool2d", "round"]
DERIVING = [n for n, v in variants.VARIANTS.items() if v.derive is not None]


def _onnx_case(op: str, inputs: dict, **attrs) -> Case:
    feeds = {k: np.asarray(v, dtype=np.float32) for k, v in inputs.items()}
    model = variants._one_node(op, list(feeds), attrs, feeds)
    return Case(ONNX_CATALOG, op, f"test_{op.lower()}", SAMPLE, "hand-made", payload=OnnxSample(model, feeds, []))


@pytest.fixture(scope="module")
def torch_cases() -> list[Case]:
    cases, _ = torch_catalog.cases(OPS, samples=1, seed=0)
    return cases


@pytest.fixture(scope="module")
def onnx_cases() -> list[Case]:
    rng = np.random.default_rng(0)
    feeds = {"X": rng.standard_normal((3, 4)).astype(np.float32)}
    gather = variants._one_node("Gather", ["X", "idx"], {"axis": 1}, feeds, [variants._i64("idx", [2, 0])])
    return [_onnx_case("Softmax", {"X": rng.standard_normal((3, 4, 5))}, axis=-1),
            _onnx_case("Log", {"X": rng.uniform(0.5, 2, (4, 6))}),
            _onnx_case("Mul", {"A": rng.standard_normal((2, 5)), "B": rng.standard_normal((2, 5))}),
            Case(ONNX_CATALOG, "Gather", "test_gather", SAMPLE, "hand-made", payload=OnnxSample(gather, feeds, []))]


@pytest.fixture(scope="module")
def derived(torch_cases, onnx_cases) -> list[Case]:
    base = torch_cases + onnx_cases
    return variants.expand(base, DERIVING)[len(base):]


@pytest.fixture(scope="module")
def extras() -> list[Case]:
    return variants.extra_cases(list(variants.VARIANTS), None)


def _load(case: Case, folder):
    """The written spec's model and inputs, loaded as fpdiff's sources load a spec."""
    spec, _ = write_case(case, folder)
    sp = importlib.util.spec_from_file_location(f"case_{abs(hash(spec))}", spec)
    mod = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(mod)
    return mod


def _same(a: list, b: list, rtol: float = 1e-12) -> bool:
    return len(a) == len(b) and all(np.allclose(np.asarray(x, np.float64), np.asarray(y, np.float64), rtol=rtol,
                                                atol=1e-12, equal_nan=True) for x, y in zip(a, b))


def _inputs(case: Case) -> list:
    if case.catalog == TORCH_CATALOG:
        return [t.numpy() for t in variants._tensor_leaves(case.payload)]
    return list(case.payload.inputs.values())


def test_every_deriving_variant_made_cases(derived):
    made = {c.variant for c in derived}
    assert made == set(DERIVING), set(DERIVING) - made


def test_ids_distinct_and_stable(torch_cases, onnx_cases, derived, extras):
    ids = [c.case_id for c in torch_cases + onnx_cases + derived + extras]
    assert len(ids) == len(set(ids))
    for c in derived:
        assert c.case_id.startswith(f"{c.case_id.split('~')[0]}~{c.variant}")
    again = variants.expand(torch_cases + onnx_cases, DERIVING)[len(torch_cases + onnx_cases):]
    assert [c.case_id for c in again] == [c.case_id for c in derived]
    for a, b in zip(again, derived):  # the same values for the same seed
        assert _same(_inputs(a), _inputs(b), rtol=0)


def test_another_seed_other_values(torch_cases):
    one = [c for c in variants.expand(torch_cases, ["tiny"]) if c.variant == "tiny"]
    two = [c for c in variants.expand(torch_cases, ["tiny"], seed=1) if c.variant == "tiny"]
    assert [c.case_id for c in one] == [c.case_id for c in two]
    assert not all(_same(_inputs(a), _inputs(b), rtol=0) for a, b in zip(one, two))


def test_float64_outputs_finite(torch_cases, onnx_cases, derived, extras):
    originals = {c.case_id: c for c in torch_cases + onnx_cases}
    for c in derived:
        before = variants.outputs(originals[c.case_id.split("~")[0]])
        if variants._finite(before):
            assert variants._finite(variants.outputs(c)), c.case_id
    for c in extras:
        assert variants._finite(variants.outputs(c)), c.case_id


def test_layouts_keep_values(torch_cases, derived, tmp_path):
    """The written one-op model under a layout gives the sample's float64 outputs (the values reach the op; only
    the memory order changed)."""
    originals = {c.case_id: c for c in torch_cases}
    layouts = [c for c in derived if c.variant in ("channels-last", "transposed")]
    assert {c.variant for c in layouts} == {"channels-last", "transposed"}
    for c in layouts:
        assert c.payload.layout == (CHANNELS_LAST if c.variant == "channels-last" else TRANSPOSED)
        orig = originals[c.case_id.split("~")[0]]
        assert _same(_inputs(c), _inputs(orig), rtol=0)
        mod = _load(c, tmp_path)
        with torch.no_grad():
            got = mod.model()(*mod.inputs())
        got = [t.numpy() for t in (got if isinstance(got, tuple) else (got,))]
        assert _same(got, variants.outputs(orig)), c.case_id


def test_dims_export_and_onnx_symbols(torch_cases, onnx_cases, derived, tmp_path):
    originals = {c.case_id: c for c in torch_cases}
    dims = [c for c in derived if c.variant in ("dynamic", "mixed")]
    torch_dims = [c for c in dims if c.catalog == TORCH_CATALOG]
    assert torch_dims and any(c.catalog == ONNX_CATALOG for c in dims)
    for c in torch_dims:
        assert all(t.shape[d] >= 2 for t, ds in zip(variants._tensor_leaves(c.payload), c.payload.dynamic)
                   for d in ds)  # export specializes 0/1
        if c.variant == "mixed":  # a proper subset of the sample's dims of size >= 2
            wanted = variants._dims_torch(originals[c.case_id.split("~")[0]])
            assert all(set(ds) <= set(w) for ds, w in zip(c.payload.dynamic, wanted))
            assert c.payload.dynamic != wanted
        mod = _load(c, tmp_path)
        ep = torch.export.export(mod.model(), mod.inputs(), dynamic_shapes=mod.dynamic_shapes())
        shapes = [n.meta["val"].shape for n in ep.graph.nodes if n.op == "placeholder"]
        assert any(not isinstance(s, int) for shape in shapes for s in shape), c.case_id
    for c in [c for c in dims if c.catalog == ONNX_CATALOG]:
        params = [d.dim_param for i in c.payload.model.graph.input for d in i.type.tensor_type.shape.dim]
        assert all(params) if c.variant == "dynamic" else any(params) and not all(params)
        onnx.checker.check_model(c.payload.model)
        orig = {o.case_id: o for o in onnx_cases}[c.case_id.split("~")[0]]
        assert _same(variants.outputs(c), variants.outputs(orig))


def test_dims_skip_what_export_fixes(torch_cases):
    """layer_norm's normalized_shape fixes the last dims: dynamic keeps only what export leaves symbolic."""
    ln = [c for c in variants.expand(torch_cases, ["dynamic"]) if c.op == "nn.functional.layer_norm"]
    for c in ln[1:]:
        x = variants._tensor_leaves(c.payload)[0]
        norm = c.payload.args[1]
        assert not any(d >= x.dim() - len(norm) for d in c.payload.dynamic[0])


def test_ranges(derived):
    for c in derived:
        floats = [a for a in _inputs(c) if a.dtype.kind == "f"]
        if c.variant == "near-max":
            peak = max(float(np.abs(a).max()) for a in floats)
            assert peak == pytest.approx(variants.NEAR_MAX, rel=1e-6) or peak == pytest.approx(
                np.sqrt(variants.NEAR_MAX), rel=1e-6)
            assert variants._peak(variants.outputs(c)) <= variants.FP16_MAX
        elif c.variant == "tiny":
            mags = np.concatenate([np.abs(a[a != 0]).ravel() for a in floats])
            assert mags.min() >= variants.TINY_RANGE[0] * 0.999 and mags.max() <= variants.TINY_RANGE[1] * 1.001
        elif c.variant == "positive":
            assert all((a >= variants.POSITIVE_OFFSET * 0.999).all() for a in floats)
        if c.catalog == ONNX_CATALOG and c.variant in ("near-max", "tiny", "positive"):
            assert c.payload.expected is None  # the catalog's expected output was for its own inputs


def test_near_max_drops_overflow(torch_cases):
    """exp of 32752 (or 181) overflows fp16 and float64 alike: no near-max case for exp."""
    made = [c for c in variants.expand(torch_cases, ["near-max"]) if c.variant == "near-max"]
    assert "softmax" in {c.op for c in made}
    assert "exp" not in {c.op for c in made}


def test_odd_sizes(derived):
    odd = [c for c in derived if c.variant == "odd-sizes"]
    assert odd
    for c in odd:
        (x,) = variants._tensor_leaves(c.payload)
        assert x.shape[-1] in variants.ODD_SIZES


def test_long_reduction_all_positive(extras):
    long = [c for c in extras if c.variant == "long-reduction"]
    assert {c.catalog for c in long} == {TORCH_CATALOG, ONNX_CATALOG}
    for c in long:
        arrays = _inputs(c)
        assert max(a.shape[-1] if i == 0 else a.shape[0] for i, a in enumerate(arrays)) in variants.LONG_TERMS
        if c.op not in ("softmax", "log_softmax", "logsumexp", "Softmax", "LogSoftmax", "ReduceLogSumExp"):
            assert all((a >= 0).all() for a in arrays), c.case_id
    # the reason for the sizes: a running fp16 sum of the 16384 positive terms stalls far from the exact sum
    x = [c for c in long if c.case_id == "sum~long-reduction-16384"][0].payload.args[0][0]
    running = np.float16(0)
    for v in x.numpy().astype(np.float16):
        running = np.float16(running + v)
    assert float(running) < 0.6 * float(x.sum())


def test_seed3_conv(extras):
    seed3 = [c for c in extras if c.variant == "seed3-conv"]
    assert {c.catalog for c in seed3} == {TORCH_CATALOG, ONNX_CATALOG}
    for c in seed3:
        (out,) = variants.outputs(c)
        assert out.tolist() == variants.SEED3_EXPECTED
    # the wrong reading of the report (the filter's C and kernel dims swapped) gives another answer: the case tells
    x = torch.tensor(variants.SEED3_INPUT, dtype=torch.float64)
    w = torch.tensor(variants.SEED3_FILTER, dtype=torch.float64)
    assert variants.seed3_conv(x, w.transpose(0, 1)).tolist() == [[[3.0, 4.0], [0.0, 0.0]]]


def test_quantize_int(extras):
    quant = {(c.catalog, c.case_id[-1]): c for c in extras if c.variant == "quantize-int"}
    assert quant[(TORCH_CATALOG, "0")].integer_valued and not quant[(TORCH_CATALOG, "1")].integer_valued
    for k in "01":  # the torch function and the ONNX QuantizeLinear graph agree at float64
        a, b = variants.outputs(quant[(TORCH_CATALOG, k)]), variants.outputs(quant[(ONNX_CATALOG, k)])
        assert _same(a, b, rtol=1e-6)
    codes = variants.outputs(quant[(TORCH_CATALOG, "0")])
    assert all((c == np.round(c)).all() and c.min() >= 0 and c.max() <= 255 for c in codes)


def test_attribute_counterparts_agree(extras):
    """Where torch and ONNX define the same thing (pooling with ceil mode, pads, grid sampling bilinear), the torch
    case and its ONNX counterpart agree at float64: the attributes were translated right."""
    by = {}
    for c in extras:
        if c.variant in ("pool-ceil", "pad-modes", "grid-outside"):
            by.setdefault((c.variant, c.case_id.rsplit("-", 1)[1]), {})[c.catalog] = c
    checked = 0
    for (variant, _), pair in by.items():
        if variant == "grid-outside" and "bicubic" in pair[TORCH_CATALOG].description:
            continue  # torch's bicubic border clamps each tap, ONNX's the sampling point: different definitions
        assert _same(variants.outputs(pair[TORCH_CATALOG]), variants.outputs(pair[ONNX_CATALOG]), rtol=1e-5), pair
        checked += 1
    assert checked >= 20


def test_extra_torch_cases_load(extras, tmp_path):
    picked = {c.variant: c for c in extras if c.catalog == TORCH_CATALOG}
    for c in picked.values():
        mod = _load(c, tmp_path)
        with torch.no_grad():
            got = mod.model()(*mod.inputs())
        got = [t.numpy() for t in (got if isinstance(got, tuple) else (got,))]
        assert _same(got, variants.outputs(c)), c.case_id


def test_extra_cases_filtered():
    pools = variants.extra_cases(["pool-ceil", "pad-modes"], ["*avg_pool*", "averagepool"])
    assert pools and {c.op for c in pools} == {"nn.functional.avg_pool2d", "AveragePool"}
    onnx_only = variants.extra_cases(["seed3-conv"], None, catalogs=[ONNX_CATALOG])
    assert [c.op for c in onnx_only] == ["Conv"]


def test_names():
    assert variants.select(["default"]) == list(variants.DEFAULT_VARIANTS)
    assert variants.select(["all"]) == list(variants.VARIANTS)
    assert variants.select([SAMPLE]) == []
    for v in variants.VARIANTS.values():
        assert v.doc and (v.derive or v.extra)
    with pytest.raises(UsageError) as e:
        variants.expand([], ["channels-last", "sideways"])
    assert "sideways" in str(e.value) and "channels-last" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UsageError):
        variants.extra_cases(["nope"], None)


def test_onnx_graph_validates():
    """A graph whose attributes do not fit is refused when it is built, not at a backend."""
    feeds = {"X": np.zeros((1, 1, 4, 4), np.float32)}
    with pytest.raises(onnx.shape_inference.InferenceError):
        variants._one_node("AveragePool", ["X"], {"kernel_shape": [3]}, feeds)
    assert helper.make_opsetid("", variants.OPSET).version >= 21
