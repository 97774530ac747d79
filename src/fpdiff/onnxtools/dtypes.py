"""ONNX float element types by name, and numpy rounding into each (bfloat16 through ml_dtypes)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

FLOATS = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
ONNX_TYPE = {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
             "bfloat16": TensorProto.BFLOAT16}


def np_cast(arr: np.ndarray, target: int) -> np.ndarray:
    """`arr` rounded to the ONNX float type `target`."""
    if target == TensorProto.BFLOAT16:
        import ml_dtypes
        return arr.astype(ml_dtypes.bfloat16)
    return arr.astype(helper.tensor_dtype_to_np_dtype(target))


# Clamping moves only small tables (eps, fills, scales): a weight tensor the format cannot hold is the model's
# numbers, not a constant a converter may pick a nearer value for.
CLAMP_MAX_SIZE = 16


def clamp_into(arr: np.ndarray, target: int) -> np.ndarray:
    """`arr` (a small float constant) with finite values the low type `target` cannot hold moved into its range, as
    onnxconverter-common and coremltools do: above its largest finite value to that value, nonzero values that
    would flush to zero to its smallest subnormal. Infinities stay: the low type holds them exactly (a Clip max
    of +inf is no limit in float16 either). Anything larger than CLAMP_MAX_SIZE is returned as it is."""
    if arr.dtype.kind != "f" or not 0 < arr.size <= CLAMP_MAX_SIZE:
        return arr
    big, tiny = _finite_range(target)
    v = arr.astype(np.float64)
    new = np.where(np.isfinite(v) & (np.abs(v) > big), np.sign(v) * big, v)
    new = np.where((v != 0) & (np.abs(v) < tiny / 2), np.sign(v) * tiny, new)
    return arr if np.array_equal(new, v) else new.astype(arr.dtype)


def _finite_range(target: int) -> tuple[float, float]:
    """(largest finite value, smallest subnormal) of the ONNX float type `target`."""
    if target == TensorProto.BFLOAT16:
        import ml_dtypes
        fi = ml_dtypes.finfo(ml_dtypes.bfloat16)
    else:
        fi = np.finfo(helper.tensor_dtype_to_np_dtype(target))
    return float(fi.max), float(fi.smallest_subnormal)
