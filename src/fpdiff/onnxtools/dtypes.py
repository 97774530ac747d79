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
