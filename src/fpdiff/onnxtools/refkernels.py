"""Kernels for the ONNX reference evaluator that compute the numbers its own compute, without its Python loops:
Conv (its im2col gathers through index arrays as large as the patch matrix), ConvTranspose and MaxPool (a Python
loop per output element), and float16 matrix products (numpy's float16 matmul is a scalar C loop). Each keeps the
evaluator's arithmetic: the same BLAS call on the same matrices, or the same sums in the same order, so float64,
float32 and bfloat16 results are bit for bit the evaluator's, and float16 ones too. Two evaluator ops are wrong, and
are right here: GlobalMaxPool on inputs that are not 4-D, and grouped ConvTranspose."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_conv import Conv as StockConv
from onnx.reference.ops.op_conv_transpose import ConvTranspose as StockConvTranspose
from onnx.reference.ops.op_matmul import MatMul as StockMatMul
from onnx.reference.ops.op_max_pool import MaxPool as StockMaxPool

# float16 products smaller than this many multiply-adds stay numpy's own loop (fast enough; one call, not K).
HALF_LOOP_MACS = 1 << 22
# float32 accumulator elements per block of a float16 product: a block (512 KiB) stays in cache while every k
# adds to it, and is large enough that one call per k costs little beside its arithmetic.
HALF_BLOCK = 1 << 17
_ALL2 = (slice(None), slice(None))  # the batch and channel axes, whole, ahead of the spatial ones in an index


def half_matmul(a: np.ndarray, b: np.ndarray, loop_macs: int = HALF_LOOP_MACS) -> np.ndarray:
    """numpy's float16 `a @ b` (and `np.dot`) for 2-D or stacked operands: every output is a float32 sum of exact
    float16 products in k order, rounded to float16 once. Here the sums run a block of outputs at a time, one
    vectorized float32 multiply-add per k, which rounds each partial sum exactly as numpy's scalar loop does; each
    block is summed on one thread, blocks on as many threads as torch uses."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if int(np.prod(batch)) * m * k * n < loop_macs or k == 0:
        return np.matmul(a, b)
    if m > n:  # the long side last: a block is then a few long rows (the sums are the same, products commute)
        flipped = half_matmul(np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2), loop_macs)
        return np.ascontiguousarray(np.swapaxes(flipped, -1, -2))
    a, b = np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])
    rows = max(1, min(m, HALF_BLOCK // 256))
    cols = max(1, HALF_BLOCK // rows)
    blocks = [(i, slice(r, r + rows), slice(c, c + cols))
              for i in np.ndindex(*batch) for c in range(0, n, cols) for r in range(0, m, rows)]
    out = np.empty(batch + (m, n), np.float16)
    for (i, rs, cs), block in _in_threads(lambda t: _half_block(a[t[0]][t[1]], b[t[0]][:, t[2]]), blocks):
        out[i][rs, cs] = block
    return out


def _in_threads(work: Callable[[Any], np.ndarray], tasks: list) -> list:
    """[(task, work(task))] with the tasks shared among as many threads as torch would use, each of them running
    torch on one thread (a task is too small to split: threads would wait on each other at every step)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(tasks)))) as pool:
            return list(zip(tasks, pool.map(work, tasks)))
    finally:
        torch.set_num_threads(threads)


def _half_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float16 with float32 sums in k order: one vectorized multiply-add per k (torch frees the GIL)."""
    import torch
    a32, b32 = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
    acc = torch.zeros((a.shape[0], b.shape[1]), dtype=torch.float32)
    for j in range(a.shape[1]):  # the product of two float16 values is exact in float32: one rounding per add
        acc.addcmul_(a32[:, j:j + 1], b32[j:j + 1])
    return acc.numpy().astype(np.float16)


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a @ b` as the evaluator computes it, with float16 through half_matmul."""
    if a.dtype == np.float16 and b.dtype == np.float16:
        return half_matmul(a, b)
    return a @ b


def im2col(x: np.ndarray, kernel_shape: Sequence[int], pads: Sequence[int],
           strides: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """The evaluator's im2col (onnx.reference.ops.op_conv), from a strided window view: rows (channel, kernel
    offset), columns (image, output position), C-contiguous, and the output's spatial shape."""
    nd = len(kernel_shape)
    padded = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)], mode="constant")
    out = tuple((padded.shape[2 + i] - kernel_shape[i]) // strides[i] + 1 for i in range(nd))
    win = sliding_window_view(padded, tuple(kernel_shape), axis=tuple(range(2, 2 + nd)))
    win = win[_ALL2 + tuple(slice(0, o * s, s) for o, s in zip(out, strides))]
    perm = (1, *range(2 + nd, 2 + 2 * nd), 0, *range(2, 2 + nd))  # (C, *kernel, N, *out)
    rows = x.shape[1] * int(np.prod(kernel_shape))
    return np.ascontiguousarray(win.transpose(perm)).reshape(rows, -1), out


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, auto_pad: str | None, dilations, group: int,
         kernel_shape, pads, strides) -> np.ndarray:
    """The evaluator's Conv: its kernel dilated with zeros, its padding, its grouped product of the patch matrix,
    its bias added in the output dtype; only the patch matrix and float16 products are made faster."""
    nd = x.ndim - 2
    dilations = list(dilations) if dilations is not None else [1] * nd
    kernel_shape = tuple(kernel_shape) if kernel_shape is not None else tuple(w.shape[2:])
    pads = list(pads) if pads is not None else [0] * (2 * nd)
    strides = list(strides) if strides is not None else [1] * nd
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group != 0:
        raise ValueError(f"Shape inconsistencies, X.shape={x.shape}, W.shape={w.shape}, group={group}.")
    if any(d != 1 for d in dilations):
        w, kernel_shape = _dilated(w, dilations, kernel_shape)
    if auto_pad == "VALID":
        pads = [0] * (2 * nd)
    elif auto_pad in ("SAME_LOWER", "SAME_UPPER"):
        pads = _same_pads(x.shape[2:], kernel_shape, strides, auto_pad)
    cols, out_shape = im2col(x, kernel_shape, pads, strides)
    per_group = w.shape[1] * int(np.prod(kernel_shape))
    cols = cols.reshape((group, per_group, -1))
    mul = _product(w.reshape((group, w.shape[0] // group, per_group)), cols)
    mul = mul.reshape((group, w.shape[0] // group, x.shape[0], *out_shape))
    mul = mul.transpose((2, 0, 1, *range(3, mul.ndim))).reshape((x.shape[0], w.shape[0], *out_shape))
    if b is not None:
        if b.size == 1:
            return mul + b
        mul += b.reshape((1, -1) + (1,) * nd)
    return mul


def _dilated(w: np.ndarray, dilations: Sequence[int], kernel_shape: Sequence[int]) -> tuple[np.ndarray, tuple]:
    """The evaluator's dilated kernel: zeros between the taps (its products then hold those zeros too)."""
    nd = len(dilations)
    shape = [*w.shape[:-nd], *(k + (k - 1) * (d - 1) for k, d in zip(w.shape[-nd:], dilations))]
    new = np.zeros(tuple(shape), dtype=w.dtype)
    new[_ALL2 + tuple(slice(0, s, d) for s, d in zip(shape[-nd:], dilations))] = w
    return new, tuple(k + (k - 1) * (d - 1) for k, d in zip(kernel_shape, dilations))


def _same_pads(spatial: Sequence[int], kernel_shape: Sequence[int], strides: Sequence[int], auto_pad: str) -> list:
    """Conv's SAME_UPPER/SAME_LOWER pads (begins, then ends), as the evaluator computes them."""
    head, tail = [], []
    for d, k, s in zip(spatial, kernel_shape, strides):
        need = max(0, ((d + s - 1) // s - 1) * s + k - d)
        first = (need + 1) // 2 if auto_pad == "SAME_LOWER" else need // 2
        head.append(first)
        tail.append(need - first)
    return head + tail


class Conv(StockConv):
    """The evaluator's Conv (conv above), as fast as one BLAS call on a gathered patch matrix allows."""
    op_domain = ""

    def _run(self, X, W, B=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None,
             strides=None):
        if X.ndim < 3:
            raise ValueError(f"X must have at least 3 dimensions but its shape is {X.shape}.")
        return (conv(X, W, B, auto_pad, dilations, group, kernel_shape, pads, strides).astype(X.dtype, copy=False),)


class MatMul(StockMatMul):
    """The evaluator's MatMul; float16 operands of two or more dims through half_matmul, the same sums faster."""
    op_domain = ""

    def _run(self, a, b):
        if a.dtype == np.float16 and b.dtype == np.float16 and a.ndim >= 2 and b.ndim >= 2:
            return (half_matmul(a, b),)
        return super()._run(a, b)


def col2im(cols: np.ndarray, image_shape: Sequence[int], kernel_shape: Sequence[int], dilations: Sequence[int],
           pads: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """The evaluator's col2im for every channel at once: cols (C, prod(kernel), prod(blocks)) added into a zero
    image (C, *image_shape) kernel offset by kernel offset, as its loop adds them (each offset reaches every pixel
    at most once, so each pixel gets the same additions in the same order)."""
    nd = len(image_shape)
    blocks = [(image_shape[i] + pads[i] + pads[i + nd] - (dilations[i] * (kernel_shape[i] - 1) + 1)) // strides[i]
              + 1 for i in range(nd)]
    if int(np.prod(blocks)) != cols.shape[-1] or int(np.prod(kernel_shape)) != cols.shape[1]:
        raise ValueError(f"col2im: {cols.shape} does not hold {blocks} blocks of kernel {list(kernel_shape)}")
    image = np.zeros((cols.shape[0], *image_shape), dtype=cols.dtype)
    cols = cols.reshape((cols.shape[0], cols.shape[1], *blocks))
    for j, offset in enumerate(np.ndindex(*kernel_shape)):
        src, dst = [slice(None)], [slice(None)]
        for i in range(nd):
            start = offset[i] * dilations[i] - pads[i]  # image position of block 0
            lo = max(0, -start + strides[i] - 1) // strides[i]
            hi = min(blocks[i], (image_shape[i] - 1 - start) // strides[i] + 1) if start < image_shape[i] else 0
            hi = max(hi, lo)
            src.append(slice(lo, hi))
            dst.append(slice(start + lo * strides[i], start + (hi - 1) * strides[i] + 1 if hi > lo else 0,
                             strides[i]))
        image[tuple(dst)] += cols[(slice(None), j) + tuple(src[1:])]
    return image


class ConvTranspose(StockConvTranspose):
    """The evaluator's ConvTranspose (its pads and output shape, its product, its col2im order, bias added in the
    product's dtype). Grouped, each group's weights and bias are its own; the evaluator's loop gives every group
    the first group's bias and cannot store more than one output channel per group."""
    op_domain = ""

    def _run(self, X, W, B=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, output_padding=None,
             output_shape=None, pads=None, strides=None):
        nd = X.ndim - 2
        dilations = list(dilations) if dilations is not None else [1] * nd
        strides = list(strides) if strides is not None else [1] * nd
        kernel_shape = list(kernel_shape) if kernel_shape is not None else list(W.shape[2:])
        output_padding = list(output_padding) if output_padding is not None else [0] * nd
        pads, output_shape = _transpose_geometry(X.shape[2:], kernel_shape, dilations, strides, output_padding,
                                                 output_shape, pads, auto_pad)
        group = group or 1
        cin, cout = X.shape[1] // group, W.shape[1]
        parts = [_transpose_group(X[:, g * cin:(g + 1) * cin], W[g * cin:(g + 1) * cin],
                                  None if B is None else B[g * cout:(g + 1) * cout], output_shape, dilations, pads,
                                  strides) for g in range(group)]
        return (np.concatenate(parts, axis=1).astype(X.dtype),)


def _transpose_geometry(spatial, kernel_shape, dilations, strides, output_padding, output_shape, pads, auto_pad):
    """(pads, output shape) of a ConvTranspose, as the evaluator derives them from its attributes."""
    nd = len(spatial)
    extent = [(kernel_shape[i] - 1) * dilations[i] + 1 for i in range(nd)]
    if pads is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if output_shape is None:
            output_shape = [spatial[i] * strides[i] for i in range(nd)]
        total = [strides[i] * (spatial[i] - 1) + output_padding[i] + extent[i] - output_shape[i] for i in range(nd)]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        pads = small + big if auto_pad == "SAME_UPPER" else big + small
        return list(pads), list(output_shape)
    pads = list(pads) if pads is not None else [0] * (2 * nd)
    if output_shape is None:
        output_shape = [strides[i] * (spatial[i] - 1) + output_padding[i] + extent[i] - pads[i] - pads[i + nd]
                        for i in range(nd)]
    return pads, list(output_shape)


def _transpose_group(x, w, b, output_shape, dilations, pads, strides) -> np.ndarray:
    """One group of a ConvTranspose, every image: the evaluator's product w^T @ x per image, then col2im."""
    k, cout, kernel_shape = w.shape[0], w.shape[1], w.shape[2:]
    w_t = w.reshape((k, -1)).T
    images = []
    for n in range(x.shape[0]):
        gemm = _product(w_t, x[n].reshape((k, -1)))
        res = col2im(gemm.reshape((cout, -1, gemm.shape[-1])), output_shape, kernel_shape, dilations, pads, strides)
        if b is not None:
            res += b.reshape((-1,) + (1,) * len(output_shape))
        images.append(res)
    return np.stack(images)


class MaxPool(StockMaxPool):
    """The evaluator's MaxPool; its strided and dilated path (a Python loop per output element) vectorized over
    outputs: kernel taps in its order, a later tap taken only when strictly greater (so a NaN is kept only when it
    is a window's first value, as there), its flat argmax indices."""
    op_domain = ""

    def _max_pool_1d(self, x, auto_pad, ceil_mode, dilations, kernel_shape, new_pads, storage_order, strides,
                     output_spatial_shape):
        return self._pooled(x, dilations, kernel_shape, new_pads, 0, strides, output_spatial_shape, empty=np.nan)

    def _max_pool_2d(self, x, auto_pad, ceil_mode, dilations, kernel_shape, new_pads, storage_order, strides,
                     output_spatial_shape):
        return self._pooled(x, dilations, kernel_shape, new_pads, storage_order, strides, output_spatial_shape,
                            empty=0)

    def _max_pool_3d(self, x, auto_pad, ceil_mode, dilations, kernel_shape, new_pads, storage_order, strides,
                     output_spatial_shape):
        return self._pooled(x, dilations, kernel_shape, new_pads, storage_order, strides, output_spatial_shape,
                            empty=np.nan)

    def _pooled(self, x, dilations, kernel_shape, new_pads, storage_order, strides, out_shape, empty):
        y, where = strided_max(x, kernel_shape, [int(p) for p in np.asarray(new_pads)[:, 0]], strides, dilations,
                               out_shape, empty)
        if len(self.output) == 1:
            return (y,)
        flat = _flat_indices(where, x.shape, storage_order)
        return (y, np.where(where[0] < 0, -1, flat) if len(kernel_shape) == 2 else flat)


def strided_max(x: np.ndarray, kernel_shape, pads_begin, strides, dilations, out_shape,
                empty: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """(max over each window, the input coordinates of the value taken, -1 where a window is all padding, whose
    value is `empty`), scanning kernel taps in order and taking a tap only when the window has none yet or it is
    strictly greater."""
    nd = len(kernel_shape)
    spatial = x.shape[2:]
    y = np.zeros(x.shape[:2] + tuple(out_shape), dtype=x.dtype)
    have = np.zeros(tuple(out_shape), dtype=bool)
    where = [np.full(x.shape[:2] + tuple(out_shape), -1, dtype=np.int64) for _ in range(nd)]
    grid = np.meshgrid(*(np.arange(o) for o in out_shape), indexing="ij")
    for offset in np.ndindex(*kernel_shape):
        coords = [grid[i] * strides[i] - pads_begin[i] + offset[i] * dilations[i] for i in range(nd)]
        valid = np.logical_and.reduce([(c >= 0) & (c < spatial[i]) for i, c in enumerate(coords)])
        v = x[_ALL2 + tuple(np.clip(c, 0, spatial[i] - 1) for i, c in enumerate(coords))]
        with np.errstate(invalid="ignore"):  # NaN compares false, as in the evaluator's loop
            take = valid & (~have | (v > y))
        y = np.where(take, v, y)
        for i in range(nd):
            where[i] = np.where(take, coords[i], where[i])
        have |= valid
    if not have.all():
        y[..., ~have] = empty
    return y, where


def _flat_indices(where: list[np.ndarray], shape: tuple, storage_order: int) -> np.ndarray:
    """MaxPool's Indices output from the taken coordinates: flat over (N*C, *spatial), row-major, or column-major
    over the spatial dims with storage_order 1."""
    spatial = shape[2:]
    nc = np.arange(shape[0] * shape[1]).reshape(shape[:2] + (1,) * len(spatial))
    flat = nc * int(np.prod(spatial))
    order = range(len(spatial)) if storage_order else reversed(range(len(spatial)))
    step = 1
    for i in order:
        flat = flat + where[i] * step
        step *= spatial[i]
    return flat


class GlobalMaxPool(OpRun):
    """The max over every axis after the first two, kept as size-1 axes: the evaluator's reduces the two axes after
    the spatial count (a 3-D [N, C, L] input gives [N, 1], a 5-D one keeps its first spatial axis)."""
    op_domain = ""

    def _run(self, x):
        return (x.max(axis=tuple(range(2, x.ndim)), keepdims=True),)


class BatchNormalization(OpRun):
    """Inference batch norm with the stored mean and variance whenever the node has one output and is not in
    training mode: the evaluator's opset 9-13 kernel takes a `momentum` attribute (which paddle2onnx and old
    exporters write on every inference BatchNormalization) as training mode and normalizes by the batch's own
    statistics. The arithmetic is the evaluator's own test-mode function. Training-mode nodes (several outputs, or
    training_mode=1) are not inference graphs: refused."""
    op_domain = ""

    def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None, is_test=None,  # noqa: ARG002
             spatial=None):  # noqa: ARG002
        from onnx.reference.ops.op_batch_normalization import _batchnorm_test_mode
        outputs = [o for o in self.onnx_node.output if o]
        if len(outputs) > 1 or training_mode:
            raise NotImplementedError("a training-mode BatchNormalization (batch statistics, running-mean outputs) "
                                      "is not an inference graph")
        eps = 1e-5 if epsilon is None else epsilon
        return (_batchnorm_test_mode(x, scale, bias, mean, var, epsilon=eps),)


class GatherElements(OpRun):
    """out[i][j] = data[idx[i][j]][j] (axis 0) by numpy's take_along_axis: the evaluator's kernel (numpy's choose)
    refuses indices narrower than the data outside the axis (the fuzzer's gathers), an axis longer than 64, and
    index tensors wider than size-1 data axes (BERT's position ids exported by dynamo: "cannot reshape array of
    size 1"), which take_along_axis broadcasts."""
    op_domain = ""

    def _run(self, data, indices, axis=None):
        axis = (axis or 0) % data.ndim
        idx = np.where(indices < 0, indices + data.shape[axis], indices).astype(np.int64)
        crop = tuple(slice(None) if d == axis or n > data.shape[d] else slice(0, n) for d, n in enumerate(idx.shape))
        return (np.take_along_axis(data[crop], idx, axis=axis),)


def fast_ops() -> list:
    """The kernels above, for the evaluator's new_ops."""
    return [Conv, ConvTranspose, MatMul, MaxPool, GlobalMaxPool, BatchNormalization, GatherElements]
