"""The fuzz vocabulary: every op means the same in its torch form and its ONNX form (float64, the reference
evaluator), types its output as torch computes it, refuses arguments that do not fit, and names real catalog ops."""
from __future__ import annotations

import random

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from fpdiff.analysis.fuzz import emit
from fpdiff.analysis.fuzz.graph import Graph, Input, Node, Sample, TensorType, attrs_of
from fpdiff.analysis.fuzz.vocab import NONZERO, POSITIVE, VOCAB
from fpdiff.onnxtools.graph import float64_ops

T = TensorType
# argument types tried per arity, in turn: broadcasting, batched matmul, NCHW conv, concat-able, pooling-sized
CANDIDATES = {
    1: [[T((2, 3, 7, 6))], [T((2, 1, 5))], [T((4, 6))], [T((1, 2, 5, 5))]],
    2: [[T((2, 3, 4)), T((3, 1))], [T((2, 3, 4)), T((2, 4, 5))], [T((1, 4, 6, 7)), T((6, 2, 3, 3))],
        [T((2, 3)), T((2, 5))], [T((3, 4)), T((4, 2))], [T((2, 3, 5, 5)), T((3, 3, 2, 2))]],
}
SEEDS = range(5)  # attribute draws per op: kernel/stride/ceil_mode and dims vary enough across five
AGREE = 1e-10  # relative (to the output's largest magnitude): two float64 implementations of one formula


def drawn(name: str, seed: int) -> tuple[list[TensorType], dict]:
    """Argument types and attributes for an op under a seed: the first candidate (from a seed-chosen start) the
    op's draw takes."""
    op, rng = VOCAB[name], random.Random(seed)
    cands = CANDIDATES[op.arity]
    for k in range(len(cands)):
        types = cands[(seed + k) % len(cands)]
        attrs = op.draw(rng, types)
        if attrs is not None:
            return types, attrs
    raise AssertionError(f"{name}: no candidate argument types fit")


def values_for(name: str, types: list[TensorType], seed: int) -> tuple[np.ndarray, ...]:
    """Standard normal inputs moved into each argument's domain."""
    op, r = VOCAB[name], np.random.default_rng(seed)
    out = []
    for i, t in enumerate(types):
        v = r.standard_normal(t.shape)
        dom = op.domain[i] if i < len(op.domain) else None
        if dom == POSITIVE:
            v = np.abs(v) + 0.1
        elif dom == NONZERO:
            v = np.where(np.abs(v) < 0.1, 0.5, v)
        out.append(v)
    return tuple(out)


def one_op(name: str, types: list[TensorType], attrs: dict, values) -> Sample:
    g = Graph(tuple(Input(t) for t in types), (Node(name, tuple(range(len(types))), attrs_of(attrs)),), len(types))
    return Sample(g, tuple(values))


def test_vocabulary_covers_the_brief():
    """Elementwise, broadcasting binary, reductions, matmul, conv, pooling and layout ops are all there."""
    assert len(VOCAB) >= 35
    tags = {t for op in VOCAB.values() for t in op.tags}
    assert {"elementwise", "broadcast", "reduction", "matmul", "conv", "pool", "layout"} <= tags
    assert {n for n, op in VOCAB.items() if op.integer_valued} == {"round", "floor", "sign"}
    for name, op in VOCAB.items():
        assert op.name == name and op.reason and len(op.domain) <= op.arity, name


@pytest.mark.parametrize("name", sorted(VOCAB))
def test_torch_and_onnx_forms_agree_in_float64(name):
    """The torch form at float64 and the ONNX form by the reference evaluator (float64 kernels) give one result,
    of the shape infer says, on every seed's drawn attributes; the ONNX model passes the full check."""
    for seed in SEEDS:
        types, attrs = drawn(name, seed)
        s = one_op(name, types, attrs, values_for(name, types, seed))
        want = emit.evaluate(s)
        assert want.shape == VOCAB[name].infer(types, attrs).shape, (attrs, want.shape)
        assert np.isfinite(want).all(), attrs
        model = emit.to_onnx(s)
        onnx.checker.check_model(model, full_check=True)
        got = ReferenceEvaluator(model, new_ops=float64_ops()).run(
            None, dict(zip(emit.input_names(s.graph), s.values)))[0]
        assert got.dtype == np.float64 and got.shape == want.shape, (attrs, got.dtype, got.shape)
        err = np.abs(got - want).max() / max(np.abs(want).max(), np.finfo(np.float64).tiny)
        assert err <= AGREE, (attrs, err)


def test_catalog_names_exist():
    """Each op names its torch OpInfo entry and its ONNX op type as ops' catalogs list them."""
    from fpdiff.analysis.ops.catalog import op_names
    torch_names, onnx_names = set(op_names("torch")), set(op_names("onnx"))
    for name, op in VOCAB.items():
        assert op.catalog[0] in torch_names, (name, op.catalog[0])
        assert op.catalog[1:] and all(c in onnx_names for c in op.catalog[1:]), (name, op.catalog)


@pytest.mark.parametrize("name,types,attrs", [
    ("add", [T((2, 3)), T((4,))], {}),
    ("matmul", [T((2, 3)), T((4, 5))], {}),
    ("matmul", [T((2, 3, 4, 5)), T((5, 2))], {}),
    ("conv2d", [T((1, 4, 6, 6)), T((6, 3, 3, 3))], {"groups": 1, "stride": 1, "padding": 0, "dilation": 1}),
    ("conv2d", [T((1, 4, 2, 2)), T((4, 4, 3, 3))], {"groups": 1, "stride": 1, "padding": 0, "dilation": 1}),
    ("max_pool2d", [T((1, 1, 5, 5))], {"kernel": 2, "stride": 1, "padding": 0, "dilation": 1, "ceil_mode": True}),
    ("avg_pool2d", [T((1, 1, 5, 5))], {"kernel": 2, "stride": 1, "padding": 2, "ceil_mode": False,
                                       "count_include_pad": True}),
    ("sum", [T((3, 4))], {"dim": 2, "keepdim": False}),
    ("sum", [T((3,))], {"dim": 0, "keepdim": False}),
    ("concat", [T((2, 3)), T((3, 4))], {"dim": 1}),
    ("reshape", [T((2, 3))], {"shape": (4, 2)}),
    ("slice", [T((2, 3))], {"dim": 1, "start": 2, "end": 2, "step": 1}),
    ("pad_reflect", [T((2, 3))], {"pad": (3, 0)}),
    ("expand", [T((2, 3))], {"shape": (2, 4)}),
    ("clamp", [T((2,))], {"min": 1.0, "max": 0.5}),
    ("pow", [T((2,))], {"exponent": 0.5}),
])
def test_infer_refuses_misfits(name, types, attrs):
    """Arguments or attributes that do not fit are a ValueError, never a wrong type."""
    with pytest.raises(ValueError):
        VOCAB[name].infer(types, attrs)


def test_draw_answers_none_where_nothing_fits():
    """draw says None for arguments no attributes can fit."""
    rng = random.Random(0)
    assert VOCAB["conv2d"].draw(rng, [T((1, 3, 5, 5)), T((4, 2, 3, 3))]) is None  # 3 channels, groups of 2
    assert VOCAB["concat"].draw(rng, [T((2, 3)), T((3, 4))]) is None
    assert VOCAB["transpose"].draw(rng, [T((5,))]) is None
    assert VOCAB["max_pool2d"].draw(rng, [T((2, 3))]) is None
    assert VOCAB["add"].draw(rng, [T((2, 3)), T((4,))]) is None


def test_draws_are_deterministic_and_valid():
    """The same seed draws the same attributes; every draw on many shapes passes the op's own infer."""
    shapes = [(1,), (3,), (2, 5), (1, 4), (3, 1, 4), (2, 3, 4, 5), (1, 1, 2, 2), (2, 2, 9, 3)]
    for name, op in VOCAB.items():
        for shape in shapes:
            types = [T(shape)] * op.arity
            for seed in range(3):
                a, b = op.draw(random.Random(seed), types), op.draw(random.Random(seed), types)
                assert a == b, name
                if a is not None:
                    op.infer(types, a)  # raises if the draw made attributes the op refuses
