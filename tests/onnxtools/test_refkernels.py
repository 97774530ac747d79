"""fpdiff's kernels for the reference evaluator compute the evaluator's own numbers, bit for bit, in every dtype the
judge and the baselines run (float64, float32, float16, bfloat16), and compute right where the evaluator is wrong."""
import ml_dtypes
import numpy as np
import pytest
import torch
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from fpdiff.onnxtools.refkernels import HALF_LOOP_MACS, fast_ops, half_matmul

DTYPES = {"float64": (np.float64, TensorProto.DOUBLE), "float32": (np.float32, TensorProto.FLOAT),
          "float16": (np.float16, TensorProto.FLOAT16), "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16)}


def _model(op: str, inputs: dict, n_out: int = 1, opset: int = 22, **attrs):
    """One `op` node over `inputs` (name -> array), every input a graph input."""
    node = helper.make_node(op, list(inputs), [f"y{i}" for i in range(n_out)], name="n", **attrs)
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(n_out)]
    return helper.make_model(helper.make_graph([node], "g", ins, outs), opset_imports=[helper.make_opsetid("", opset)])


def _both(op: str, inputs: dict, n_out: int = 1, **attrs) -> tuple[list, list]:
    """(the evaluator's own outputs, with fpdiff's kernels) of one node."""
    model = _model(op, inputs, n_out, **attrs)
    stock = ReferenceEvaluator(model).run(None, inputs)
    return stock, ReferenceEvaluator(model, new_ops=fast_ops()).run(None, inputs)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit in value (NaN where NaN), dtype and shape."""
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.astype(np.float64), b.astype(np.float64),
                                                                      equal_nan=True)


def _rand(shape, dtype, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# x shape, w shape, attributes: 1-D and 2-D and 3-D, groups, depthwise, dilations, strides, pads, auto_pad
CONV_CASES = [
    ((2, 3, 17), (4, 3, 3), {}),
    ((1, 4, 19), (6, 2, 5), {"group": 2, "strides": [2], "pads": [2, 1], "dilations": [2]}),
    ((2, 3, 9, 11), (5, 3, 3, 2), {"pads": [1, 0, 2, 1]}),
    ((1, 4, 10, 9), (8, 1, 3, 3), {"group": 4, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 3, 8, 7), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 8, 7), (4, 3, 4, 2), {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ((2, 2, 7, 8), (3, 2, 2, 3), {"auto_pad": "VALID", "strides": [1, 2]}),
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 2, 1], "strides": [1, 2, 1]}),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("bias", [False, True])
def test_conv_is_the_evaluators_own(case, dtype, bias):
    """The same BLAS call on the same patch matrix (float16: the same sums): every bit the evaluator's."""
    xs, ws, attrs = CONV_CASES[case]
    np_t = DTYPES[dtype][0]
    inputs = {"x": _rand(xs, np_t, 1), "w": _rand(ws, np_t, 2)}
    if bias:
        inputs["b"] = _rand(ws[:1], np_t, 3)
    stock, fast = _both("Conv", inputs, **attrs)
    assert _same(stock[0], fast[0]), np.abs(stock[0].astype(np.float64) - fast[0].astype(np.float64)).max()


def test_conv_in_float64_is_torchs_to_float64_rounding():
    """The float64 judge's Conv is the mathematical convolution, to float64 rounding (torch's, an independent one)."""
    x, w, b = _rand((2, 6, 12, 10), np.float64, 1), _rand((4, 3, 3, 2), np.float64, 2), _rand((4,), np.float64, 3)
    attrs = {"group": 2, "strides": [2, 1], "dilations": [1, 2], "pads": [1, 2, 0, 1]}
    _, fast = _both("Conv", {"x": x, "w": w, "b": b}, **attrs)
    padded = torch.nn.functional.pad(torch.from_numpy(x), (2, 1, 1, 0))
    want = torch.nn.functional.conv2d(padded, torch.from_numpy(w), torch.from_numpy(b), stride=(2, 1),
                                      dilation=(1, 2), groups=2).numpy()
    np.testing.assert_allclose(fast[0], want, rtol=1e-12, atol=1e-12)


def test_conv_in_float16_past_numpys_own_loop_is_its_numbers():
    """A float16 Conv large enough to leave numpy's loop for the blocked float32 sums gives the same bits."""
    inputs = {"x": _rand((1, 16, 40, 40), np.float16, 1), "w": _rand((32, 16, 3, 3), np.float16, 2)}
    assert 32 * 38 * 38 * 16 * 9 >= HALF_LOOP_MACS
    stock, fast = _both("Conv", inputs)
    assert _same(stock[0], fast[0])


@pytest.mark.parametrize("shapes", [((40, 33), (33, 70)), ((70, 33), (33, 40)), ((3, 17, 300), (3, 300, 50)),
                                    ((2, 1, 9, 33), (3, 33, 20)), ((1, 5), (5, 1)),
                                    ((2, 40, 20), (20, 7000)), ((600, 8), (8, 700))])  # several blocks a product
def test_half_matmul_is_numpys_float16_matmul(shapes):
    """Every output a float32 sum in k order rounded to float16 once, whatever the block or the operand order."""
    a, b = _rand(shapes[0], np.float16, 1), _rand(shapes[1], np.float16, 2)
    assert _same(np.matmul(a, b), half_matmul(a, b, loop_macs=0))


def test_float16_matmul_node_is_the_evaluators_own():
    inputs = {"a": _rand((2, 64, 96), np.float16, 1), "b": _rand((96, 400), np.float16, 2)}
    stock, fast = _both("MatMul", inputs)
    assert _same(stock[0], fast[0])


# x shape, w shape, attributes (group 1: the evaluator's own path)
CONV_T_CASES = [
    ((2, 3, 7), (3, 2, 3), {}),
    ((1, 3, 6), (3, 4, 4), {"strides": [2], "pads": [1, 2], "dilations": [2]}),
    ((1, 2, 5, 4), (2, 3, 3, 2), {"strides": [2, 3], "pads": [1, 0, 0, 1], "output_padding": [1, 1]}),
    ((2, 2, 4, 5), (2, 2, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 4, 5), (2, 2, 2, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 1], "output_shape": [8, 5]}),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", range(len(CONV_T_CASES)))
def test_conv_transpose_is_the_evaluators_own(case, dtype):
    """The same product, the same col2im additions in the same order, the bias in the product's dtype."""
    xs, ws, attrs = CONV_T_CASES[case]
    np_t = DTYPES[dtype][0]
    inputs = {"x": _rand(xs, np_t, 1), "w": _rand(ws, np_t, 2), "b": _rand(ws[1:2], np_t, 3)}
    stock, fast = _both("ConvTranspose", inputs, **attrs)
    assert _same(stock[0], fast[0])


def test_grouped_conv_transpose_is_right_where_the_evaluators_is_not():
    """Each group its own weights, bias and output channels: the evaluator's loop slices the weights by output
    channel (a group of two input channels fails) and gives every group the first group's bias."""
    x, w, b = _rand((2, 4, 5, 6), np.float64, 1), _rand((4, 3, 3, 2), np.float64, 2), _rand((6,), np.float64, 3)
    attrs = {"group": 2, "strides": [2, 1], "pads": [1, 0, 0, 1]}
    model = _model("ConvTranspose", {"x": x, "w": w, "b": b}, **attrs)
    got = ReferenceEvaluator(model, new_ops=fast_ops()).run(None, {"x": x, "w": w, "b": b})[0]
    full = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                                                stride=(2, 1), groups=2).numpy()
    np.testing.assert_allclose(got, full[:, :, 1:, :-1], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError):
        ReferenceEvaluator(model).run(None, {"x": x, "w": w, "b": b})
    depthwise = {"x": x, "w": w[:, :1], "b": b[:4]}  # the one grouped case the evaluator's loop runs
    stock, fast = _both("ConvTranspose", depthwise, group=4, strides=[2, 1])
    assert not np.array_equal(stock[0], fast[0])
    first_bias = _both("ConvTranspose", {**depthwise, "b": np.full(4, b[0])}, group=4, strides=[2, 1])[1]
    assert _same(stock[0], first_bias[0])


# x shape, attributes: the evaluator's strided or dilated path (its Python loop per output element)
POOL_CASES = [
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2]}),
    ((1, 2, 12), {"kernel_shape": [2], "strides": [3], "pads": [1, 1], "dilations": [2]}),
    ((2, 2, 9, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 3, 9, 10), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 1, 1], "ceil_mode": 1}),
    ((1, 2, 9, 10), {"kernel_shape": [2, 3], "dilations": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 10, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 3], "pads": [0, 1, 1, 1, 0, 0]}),
]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", range(len(POOL_CASES)))
def test_strided_max_pool_is_the_evaluators_own(case, dtype):
    xs, attrs = POOL_CASES[case]
    x = _rand(xs, DTYPES[dtype][0], 1)
    flat = x.reshape(-1)
    flat[::7] = np.nan  # a NaN is kept only where it is its window's first tap, as the evaluator's loop does
    tie = np.arange(3, flat.size - 1, 11)
    flat[tie] = flat[tie + 1]  # ties: the first tap wins
    stock, fast = _both("MaxPool", {"x": x}, **attrs)
    assert _same(stock[0], fast[0])


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("case", [0, 2, 3, 6])
def test_strided_max_pool_indices_are_the_evaluators_own(case, storage_order):
    xs, attrs = POOL_CASES[case]
    x = _rand(xs, np.float32, 1)
    stock, fast = _both("MaxPool", {"x": x}, n_out=2, storage_order=storage_order, **attrs)
    assert _same(stock[0], fast[0]) and np.array_equal(stock[1], fast[1])


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (2, 3, 2, 4, 5)])
def test_global_max_pool_reduces_every_spatial_axis(shape):
    """The evaluator's reduces the two axes after the spatial count: [N, C, L] gives [N, 1], 5-D keeps an axis."""
    x = _rand(shape, np.float64, 1)
    stock, fast = _both("GlobalMaxPool", {"x": x})
    want = x.max(axis=tuple(range(2, x.ndim)), keepdims=True)
    assert _same(fast[0], want)
    assert _same(stock[0], want) == (len(shape) == 4)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_batchnorm_in_inference_is_the_evaluators_own_test_mode(dtype):
    """At opset 15 (training_mode 0) the stock kernel is right: fpdiff's equals it bit for bit in every dtype."""
    np_dtype = DTYPES[dtype][0]
    x = _rand((2, 3, 4, 5), np_dtype)
    params = {n: (np.abs(_rand((3,), np_dtype, seed=i + 1)) + np_dtype(0.5)).astype(np_dtype)
              for i, n in enumerate(("s", "b", "m", "v"))}
    stock, ours = _both("BatchNormalization", {"x": x, **params}, epsilon=1e-3, opset=15)
    assert _same(stock[0], ours[0])


def test_opset9_batchnorm_with_momentum_is_inference_not_training():
    """The stock opset-9 kernel normalizes by the batch's own statistics when `momentum` is set (its schema default):
    a one-output node is inference, by the stored mean and variance."""
    x = _rand((2, 3, 4, 5), np.float64) * 3 + 1
    s, b, m, v = np.ones(3), np.zeros(3), np.full(3, 1.0), np.full(3, 4.0)
    stock, ours = _both("BatchNormalization", {"x": x, "s": s, "b": b, "m": m, "v": v}, epsilon=0.0, momentum=0.9,
                        opset=9)
    assert np.allclose(ours[0], (x - 1.0) / 2.0)
    assert not np.allclose(stock[0], ours[0])  # the evaluator's training-mode reading


def test_gather_elements_takes_narrower_indices_and_long_axes():
    """The operator allows indices narrower than the data outside the axis (torch.gather exports them) and any axis
    length; the stock evaluator refused both. The result is torch.gather's."""
    import onnx

    from fpdiff.onnxtools.graph import float64_ops
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 70]),
                                            helper.make_tensor_value_info("i", TensorProto.INT64, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    onnx.checker.check_model(model)
    rng = np.random.default_rng(0)
    x, i = rng.standard_normal((3, 70)), rng.integers(-70, 70, (2, 4))
    got = ReferenceEvaluator(model, new_ops=float64_ops()).run(None, {"x": x, "i": i})[0]
    want = torch.gather(torch.from_numpy(x), 1, torch.from_numpy(np.where(i < 0, i + 70, i))).numpy()
    np.testing.assert_array_equal(got, want)
