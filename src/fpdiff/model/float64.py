"""True float64 for a torch model: every floating op computes in float64 whatever the model asks.

`model.double()` with float64 inputs is not a float64 run when the model casts inside: transformers' RMSNorm and
rotary code call `.to(torch.float32)`, so a "float64" reference computed partly in float32 (7e-8 to 1.1e-7 from a
true float64 run on Llama-family decoders). Promotion works at torch's dispatch level (a TorchDispatchMode), below
every Python spelling of a cast (`.float()`, `.to(...)`, `type_as`, `dtype=` of factory ops and reductions, the
casts autocast inserts): a floating dtype narrower than float64 asked of an op is replaced by float64, and a
narrower floating tensor reaching an op is widened first. Integer and bool dtypes are left as they are. Each cast the
model asks for is recorded with the user's file:line, so the report can say where the model leaves float64.

Ops that have no float64 kernel at all (`torch._grouped_mm`, transformers' default MoE experts kernel) are computed
by fpdiff's own float64 decomposition, exact up to float64 rounding, and reported as such.

Use (the float64 judge, or any analysis that needs a float64 run of a torch model):

    with float64_everywhere() as promotion:
        out = model.double()(*float64_inputs)
    promotion.findings()  # compare.Finding list: model-cast (file:line, dtype asked), fpdiff-decomposition
"""
from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from fpdiff.core.compare import Finding
from fpdiff.core.errors import Unsupported
from fpdiff.model.graph import source_line

aten = torch.ops.aten

# What each narrower floating dtype is computed in. Complex follows its float parts (rotary code in complex64).
WIDER = {torch.float32: torch.float64, torch.float16: torch.float64, torch.bfloat16: torch.float64,
         torch.complex32: torch.complex128, torch.complex64: torch.complex128}
# A bitcast reinterprets bits (`x.view(torch.int32)`, `view(torch.float32)`): its dtype is not a precision request.
BITCASTS = {aten.view.dtype}
MODEL_CAST, DECOMPOSITION = "model-cast", "fpdiff-decomposition"
_HERE = __file__.removesuffix("c")  # this file's frames are not the model's


@dataclass
class Cast:
    """One place in the model's source that asked for a narrower dtype, and how often it did."""
    where: str
    asked: str
    op: str
    count: int = 0


class Float64Promotion(TorchDispatchMode):
    """The dispatch mode behind float64_everywhere(); `promote=False` only records the model's casts."""

    def __init__(self, promote: bool = True) -> None:
        super().__init__()
        self.promote = promote
        self.casts: dict[tuple[str, str, str], Cast] = {}
        self.decomposed: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in BITCASTS:
            return func(*args, **kwargs)
        args, kwargs = self._dtypes(func, args, kwargs)
        if self.promote:
            args, kwargs = tree_map(self._widen, (args, kwargs))
            own = DECOMPOSITIONS.get(func)
            if own is not None and _float64_args(args):
                self.decomposed[func.name()] = self.decomposed.get(func.name(), 0) + 1
                return own(*args, **kwargs)
        try:
            return func(*args, **kwargs)
        except RuntimeError as e:  # run as written: an op torch has no float64 kernel for is torch's refusal
            if func in DECOMPOSITIONS and _float64_args(args):
                raise Unsupported(f"torch has no float64 kernel for {func.name()} ({e}); the float64 judge computes "
                                  "it with fpdiff's own decomposition", op=func.name(), dtype="float64") from e
            raise

    def _dtypes(self, func, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Each dtype argument asking for a narrower float (`dtype=`, `out_dtype=`, a positional dtype): recorded,
        and float64 when promoting."""
        asked = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.dtype) and v in WIDER]
        if not asked:
            return args, kwargs
        for dtype in asked:
            self._record(func, dtype)
        if not self.promote:
            return args, kwargs
        swap = lambda v: WIDER[v] if isinstance(v, torch.dtype) and v in WIDER else v  # noqa: E731
        return tuple(swap(v) for v in args), {k: swap(v) for k, v in kwargs.items()}

    def _widen(self, x):
        if isinstance(x, torch.Tensor) and x.dtype in WIDER:
            return x.to(WIDER[x.dtype])
        return x

    def _record(self, func, dtype: torch.dtype) -> None:
        frames = [f for f in traceback.extract_stack() if f.filename != _HERE]
        where = source_line("".join(traceback.format_list(frames))) or "unknown line"
        asked = str(dtype).removeprefix("torch.")
        key = (where, asked, func.name())
        cast = self.casts.get(key) or self.casts.setdefault(key, Cast(where, asked, func.name()))
        cast.count += 1

    def findings(self) -> list[Finding]:
        """What the report says: each cast the model asked for (file:line), and each op fpdiff computed itself."""
        out = []
        for c in self.casts.values():
            done = "computed in float64 instead" if self.promote else "this run computed it as asked"
            out.append(Finding(MODEL_CAST, f"the model asks for {c.asked} at {c.where} ({c.op}, {c.count}x per run): "
                               f"{done}", op=c.op,
                               remedy=None if self.promote else "the float64 judge computes it in float64"))
        for op, n in self.decomposed.items():
            out.append(Finding(DECOMPOSITION, f"{op} has no float64 kernel in torch: fpdiff computed it with its own "
                               f"float64 decomposition ({DESCRIBED.get(op, 'per-element loops of matmuls')}, "
                               f"{n}x per run), exact up to float64 rounding", op=op))
        return out


def float64_everywhere(promote: bool = True) -> Float64Promotion:
    """Context manager: inside it every floating op of eager torch computes in float64, the default dtype is
    float64 (Python floats, `torch.zeros(n)`), and the model's casts are recorded. Run the model cast to float64
    (`model.double()`, float64 inputs) inside it; call `.findings()` after. `promote=False` changes nothing and only
    records the casts (what a run of the model as written does). Nested with other dispatch modes, it is innermost."""
    return _WithDefaultDtype(promote)


class _WithDefaultDtype(Float64Promotion):
    def __enter__(self):
        self._saved = torch.get_default_dtype()
        if self.promote:
            torch.set_default_dtype(torch.float64)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            torch.set_default_dtype(self._saved)


def run_float64(fn: Callable, *inputs, promote: bool = True) -> tuple[object, list[Finding]]:
    """`fn(*inputs)` under float64_everywhere() (no grad), with float inputs in float64: (outputs, findings)."""
    xs = tuple(t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs)
    with torch.no_grad(), float64_everywhere(promote) as mode:
        out = fn(*xs)
    return out, mode.findings()


def _float64_args(args: tuple) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args)


def _grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None,
                bias: torch.Tensor | None = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch._grouped_mm by one matmul per group (torch's kernels take float32/16/bf16 only). The four layouts of
    torch's meta function: 2D x 3D (groups of rows of `a`), 3D x 2D (groups of columns of `b`), 2D x 2D (groups of
    the shared dim, one output per group), 3D x 3D (a batched matmul). Rows or columns past the last offset are 0."""
    dtype = out_dtype or a.dtype
    if a.dim() == 3 and b.dim() == 3:
        out = torch.bmm(a, b)
    else:
        ends = [int(e) for e in offs.tolist()]
        starts = [0] + ends[:-1]
        if a.dim() == 2 and b.dim() == 3:
            out = a.new_zeros(a.shape[0], b.shape[-1])
            for g, (s, e) in enumerate(zip(starts, ends)):
                out[s:e] = a[s:e] @ b[g]
        elif a.dim() == 3:
            out = a.new_zeros(a.shape[1], b.shape[1])
            for g, (s, e) in enumerate(zip(starts, ends)):
                out[:, s:e] = a[g] @ b[:, s:e]
        else:
            out = a.new_zeros(len(ends), a.shape[0], b.shape[1])
            for g, (s, e) in enumerate(zip(starts, ends)):
                out[g] = a[:, s:e] @ b[s:e]
    if bias is not None:
        out = out + bias
    return out.to(dtype)


# fpdiff's own float64 implementations of ops whose torch kernels refuse float64.
DECOMPOSITIONS: dict = {aten._grouped_mm.default: _grouped_mm}
DESCRIBED = {"aten::_grouped_mm": "one matmul per group of rows, columns or shared dim"}
