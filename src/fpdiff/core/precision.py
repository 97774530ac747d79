"""One vocabulary of precisions for every backend, with the numbers the verdict rules are derived from."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch

from fpdiff.core.errors import UsageError


@dataclass(frozen=True)
class Scheme:
    """How a quantized format maps floats to its grid: what the report says of a quantized cell, and what the
    backend's own quantization tool is asked for."""
    weights: str  # int8, int4, fp8-e4m3
    activations: str  # uint8, int8, fp8-e4m3, or float (weight-only)
    weight_granularity: str  # per-channel, per-tensor, group of 32
    activation_granularity: str  # per-tensor (calibrated), per-tensor at run time, none
    symmetric_weights: bool
    symmetric_activations: bool
    rounding: str  # half to even (ONNX QuantizeLinear), nearest e4m3 value
    calibration: str  # minmax on the calibration inputs, none (run time), none (weight-only)
    group_size: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    def text(self) -> str:
        """One line for the report: weights, activations, granularity, symmetry, rounding, calibration."""
        sym = lambda b: "symmetric" if b else "asymmetric"  # noqa: E731
        acts = (f"activations {self.activations} {self.activation_granularity} {sym(self.symmetric_activations)}"
                if self.activations != "float" else "activations float")
        return (f"weights {self.weights} {self.weight_granularity} {sym(self.symmetric_weights)}, {acts}, rounding "
                f"{self.rounding}, calibration {self.calibration}")


@dataclass(frozen=True)
class Precision:
    name: str
    dtype: torch.dtype  # dtype of weights and float inputs handed to the backend
    compute: torch.dtype  # the narrowest dtype arithmetic is expected to round to
    autocast: torch.dtype | None = None  # autocast: weights stay fp32, ops choose per torch's policy
    cuda_only: bool = False
    # Relative-L2 error vs float64 below which a cell passes. Reasons, per precision, below.
    tolerance: float = 0.0
    tf32_matmul: bool = False  # float32 storage, matmul and conv inputs rounded to TF32's 10 mantissa bits
    scheme: Scheme | None = None  # a quantized format: judged against its own float64 emulation (judging/quantized.py)

    @property
    def is_quantized(self) -> bool:
        """Integer or fp8 weights (and activations): the float formats' rules do not apply to it."""
        return self.scheme is not None

    @property
    def is_float64(self) -> bool:
        """Arithmetic in float64: the judge's own format."""
        return self.compute == torch.float64

    @property
    def is_bf16(self) -> bool:
        """Arithmetic rounds to bfloat16 (the whole model cast, or autocast's low-precision ops)."""
        return self.compute == torch.bfloat16

    @property
    def is_fp16(self) -> bool:
        """Arithmetic rounds to float16 (the whole model cast, or autocast's low-precision ops)."""
        return self.compute == torch.float16

    @property
    def whole(self) -> torch.dtype | None:
        """The dtype of a whole-model cast (fp64, fp32, fp16, bf16), None for autocast and TF32: what a backend with
        one switch per dtype asks of a precision."""
        return self.dtype if self.is_cast and not self.tf32_matmul else None

    @property
    def cast_dtype(self) -> str | None:
        """`whole` by its torch name ("float16"), for code that does not load torch."""
        return dtype_name(self.whole) if self.whole is not None else None

    @property
    def is_plain_fp32(self) -> bool:
        """float32 storage and arithmetic, no TF32 rounding: the home format every other is measured from."""
        return self.is_cast and self.dtype == torch.float32 and self.compute == torch.float32 and not self.tf32_matmul

    @property
    def is_cast(self) -> bool:
        """Whole-model cast (like .half()): every float tensor must really be of `dtype`."""
        return self.autocast is None

    @property
    def unit_roundoff(self) -> float:
        return float(torch.finfo(self.compute).eps) / 2


# Tolerances (relative L2 of the output against float64). A pass means "as close as this format can be
# expected to get for a model of moderate depth"; anything beyond it is precision-loss or mismatch, decided
# against the baseline (see compare.py), so these numbers never decide alone that a backend is wrong.
#   fp64: u = 1.1e-16; 1e-12 leaves room for different accumulation orders over millions of terms.
#   fp32/tf32-off: u = 6.0e-8; 1e-5 (about 170 u) absorbs reordered and blocked reductions, fused kernels and
#         different exp/tanh approximations across backends; a 1e-3 relative error in any one op is 10-100x over.
#   tf32: inputs of matmul/conv rounded to 10 mantissa bits (u = 4.9e-4); per-op error ~3e-4 measured on an H100,
#         so 5e-3 allows about 10 layers of it.
#   fp16: u = 4.9e-4; 1e-2 (about 20 u): measured all-MiniLM-L6-v2 at 1.6e-3 on torch CPU (6 layers).
#   bf16: u = 3.9e-3; 5e-2 (about 13 u): measured all-MiniLM-L6-v2 at 1.3e-2 on torch CPU.
#   amp-*: the low-precision ops round like the pure format, the rest stay fp32: same tolerance as the format.
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp64", torch.float64, torch.float64, tolerance=1e-12),
        Precision("fp32", torch.float32, torch.float32, tolerance=1e-5),
        Precision("tf32", torch.float32, torch.float32, cuda_only=True, tolerance=5e-3, tf32_matmul=True),
        Precision("fp16", torch.float16, torch.float16, tolerance=1e-2),
        Precision("bf16", torch.bfloat16, torch.bfloat16, tolerance=5e-2),
        Precision("amp-fp16", torch.float32, torch.float16, autocast=torch.float16, tolerance=1e-2),
        Precision("amp-bf16", torch.float32, torch.bfloat16, autocast=torch.bfloat16, tolerance=5e-2),
    )
}

# Quantized formats: the float model's inputs and float ops stay float32, weights (and activations) are held on the
# format's grid. Tolerance: relative L2 of the output against float64 below which the format's cost passes; beyond
# it the cell is `quantization-loss` (what the format costs), never a claim that the backend is wrong: that is
# measured against the exact emulation (judging/quantized.py).
#   int8, int8-dynamic: a step is 1/255 of a tensor's range, so each quantized tensor adds about 0.29 step rms of
#         noise, 0.1-1 % of its values' spread for activations that use a quarter to all of the range; 5e-2 allows
#         a few tens of quantized layers (measured: 0.9 % on the tiny CNN, 2.3 % on a 2-layer BERT, static).
#   int4-weight: a step is 1/15 of a 32-weight block's range: about 2 % of the weights' spread per matmul (measured
#         0.2 % on the 2-layer BERT); 1e-1 allows a deep stack of them.
#   fp8 (e4m3): 3 mantissa bits, relative rounding up to 2^-4 (3.6 % rms) on every quantized tensor; 1.5e-1.
QUANTIZED: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("int8", torch.float32, torch.float32, tolerance=5e-2, scheme=Scheme(
            "int8", "uint8", "per-channel", "per-tensor (calibrated)", True, False, "half to even",
            "minmax on the calibration inputs")),
        Precision("int8-dynamic", torch.float32, torch.float32, tolerance=5e-2, scheme=Scheme(
            "int8", "uint8", "per-channel", "per-tensor at run time", True, False, "half to even",
            "none (ranges measured at run time)")),
        Precision("int4-weight", torch.float32, torch.float32, tolerance=1e-1, scheme=Scheme(
            "int4", "float", "group of 32", "none", True, False, "half to even", "none (weight-only)",
            group_size=32)),
        Precision("fp8", torch.float32, torch.float32, tolerance=1.5e-1, scheme=Scheme(
            "fp8-e4m3", "fp8-e4m3", "per-tensor", "per-tensor (calibrated)", True, True, "nearest e4m3 value",
            "distribution on the calibration inputs")),
    )
}

# the formats code refers to by role (the judge's float64, the fp32 home format, the two 16-bit formats), as objects
FP64, FP32, FP16, BF16 = (PRECISIONS[n] for n in ("fp64", "fp32", "fp16", "bf16"))

DEFAULT_PRECISIONS = ("fp64", "fp32", "fp16", "bf16", "amp-bf16")


# torch's and numpy's names for the formats that are one precision here: what people type (and torch.float16 itself)
ALIASES = {"float64": "fp64", "double": "fp64", "f64": "fp64", "float32": "fp32", "float": "fp32", "f32": "fp32",
           "single": "fp32", "float16": "fp16", "half": "fp16", "f16": "fp16", "bfloat16": "bf16"}


def canonical(name: object) -> str:
    """A precision as its name here: fpdiff's own names, torch's dtype names (`float16`, `half`, `torch.bfloat16`),
    any case, or a torch.dtype that is one precision; anything else is one line."""
    if isinstance(name, torch.dtype):
        name = dtype_name(name)
    if not isinstance(name, str):
        raise UsageError(f"a precision is a name such as fp16 or a torch dtype, not {type(name).__name__}")
    low = name.strip().lower().removeprefix("torch.")
    low = ALIASES.get(low, low)
    if low in QUANTIZED:
        raise UsageError(f"{low} is a quantized format: the float grid does not judge it (`fpdiff quant MODEL "
                         f"--schemes {low}` judges it against its own float64 emulation)")
    if low not in PRECISIONS:
        raise UsageError(f"unknown precision {name!r}; known: {', '.join(PRECISIONS)} (or torch's names: "
                         f"{', '.join(ALIASES)})")
    return low


def get(name: str) -> Precision:
    return PRECISIONS[canonical(name)]


def named(name: str) -> Precision:
    """A float precision or a quantized format by its name: how a job's precision travels between processes."""
    low = name.strip().lower()
    return QUANTIZED[low] if low in QUANTIZED else get(name)


def quantized(name: object) -> Precision:
    """A quantized format by its name, anything else one line."""
    low = name.strip().lower() if isinstance(name, str) else name
    if low not in QUANTIZED:
        raise UsageError(f"unknown quantized format {name!r}; known: {', '.join(QUANTIZED)}")
    return QUANTIZED[low]


def autocast_of(p: Precision) -> Precision:
    """The autocast precision whose low ops compute in `p`'s format (amp-fp16 for fp16): the amp cell beside it."""
    for q in PRECISIONS.values():
        if q.autocast is not None and q.autocast == p.compute:
            return q
    raise UsageError(f"no autocast precision computes its low ops in {p.name}")


def effective(p: Precision, tolerances: Mapping[str, float] | None) -> Precision:
    """The precision with a model's own tolerance for it (a spec's `tolerance`), when it declares one: applied once,
    where a check's keys are made, so every rule after reads the same number."""
    over = (tolerances or {}).get(p.name)
    return replace(p, tolerance=float(over)) if over else p


def of_dtype(name: str | None) -> Precision:
    """The whole-model precision that computes in the dtype named ("float16"), fp32 for any other: how a converted
    file's own dtypes read as a precision."""
    return next((p for p in (FP64, FP16, BF16) if dtype_name(p.compute) == name), FP32)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def cast_tensor(t: torch.Tensor, precision: Precision) -> torch.Tensor:
    """Float tensors take the precision's dtype; integer and bool tensors stay as they are."""
    return t.to(precision.dtype) if t.is_floating_point() else t


def cast_inputs(inputs: tuple, precision: Precision) -> tuple:
    return tuple(cast_tensor(t, precision) for t in inputs)
