"""Metrics against the float64 reference and the verdict rules; knows nothing of backends."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from fpdiff.core.precision import Precision, dtype_name
from fpdiff.core.status import CELL_STATUSES, Status

PASS, PRECISION_LOSS, MISMATCH, UNJUDGED = Status.PASS, Status.PRECISION_LOSS, Status.MISMATCH, Status.UNJUDGED
UNSUPPORTED, ERROR, CRASH, TIMEOUT = Status.UNSUPPORTED, Status.ERROR, Status.CRASH, Status.TIMEOUT
STATUSES = CELL_STATUSES

# Mismatch rule: a cell is a likely backend bug when its error is more than BASELINE_FACTOR times the error of
# the reference implementation (torch eager on the CPU) at the same precision. Two correct implementations of one
# precision make errors of the same size (different summation orders and approximations, same rounding unit):
# over many output elements the ratio of their relative L2 errors stays within ~1.5x, and torch's own accuracy
# minifier accepts up to 3x. 4x keeps a margin above that; small outputs (< SMALL_NUMEL elements) average
# over few errors, so they get 8x. A 1e-3 error in one fp32 op is thousands of times the fp32 baseline.
BASELINE_FACTOR = 4.0
SMALL_NUMEL = 1000
SMALL_BASELINE_FACTOR = 8.0
# The max-error rule catches errors confined to a few elements, which relative L2 dilutes. Maxima of two
# independent error samples vary more than their means, hence a wider factor.
MAX_FACTOR = 16.0

# Coarser-than-requested rule. A backend that computes in a narrower format than asked (bf16 when fp16 was asked,
# TF32 when fp32 was, IREE's f64->f32 demotion) multiplies the baseline's error by about 2^(bits lost). Going
# down to the next format a backend could silently use costs NEXT_FORMAT_GAP bits, so a cell whose error is
# above the geometric middle, 2^(gap/2) times the baseline's (and above the mismatch factor, the spread of
# healthy implementations), is flagged even under tolerance: fp16 -> bf16 loses 3 bits (flag above 4x),
# fp32 -> tf32 13 bits (above ~90x), fp64 -> fp32 29 bits (above ~23000x). Below one unit roundoff of the
# requested format nothing can be said (an exact baseline makes any ratio infinite). Unlike the mismatch rule,
# small outputs get no wider factor: this is a finding on a passing cell, not a verdict, and the false alarms of
# 4x on every output size are measured on the corpus (BENCHMARKS.md).
# Flip rule, for integer and boolean outputs (argmax, top-k indices, masks): an element is right or wrong, so they are
# counted, never put in a float norm. A float model's integer outputs flip where its float values are near a tie
# (two logits within the precision's rounding); the baseline at the same precision shows how many such ties the
# input has, and a healthy backend breaks about as many the other way. Mismatch beyond FLIP_FACTOR times the
# baseline's flips (the factor of the rel L2 rule: the same spread of healthy implementations) plus FLIP_SLACK
# (one near tie the baseline happened to break the float64 way: counts of rare events are noisy at 0 and 1).
# Integer arithmetic is exact in every implementation: its baseline flips nothing, and more than one flip is a
# mismatch. Any flip within the rule is precision-loss, never pass: a changed index is not inside a tolerance.
FLIP_FACTOR = 4.0
FLIP_SLACK = 1

MANTISSA_BITS = {53: "fp64", 24: "fp32", 11: "fp16 or tf32", 8: "bf16", 4: "fp8 (e4m3)"}
NEXT_FORMAT_GAP = {53: 29, 24: 13, 11: 3, 8: 4}


@dataclass
class Metrics:
    max_abs: float
    max_rel: float
    rel_l2: float
    cosine: float
    snr_db: float
    ulp_max: float
    ulp_median: float
    max_norm: float  # max |error| / max |reference|: the worst element, on the output's own scale
    nan: int
    inf: int
    numel: int  # float output elements (the metrics above are over these)
    discrete: int = 0  # integer and boolean output elements (argmax, masks): judged by flips (judge_flips)
    flips: int = 0  # of those, how many differ from the float64 reference's

    def as_dict(self) -> dict:
        return {k: json_float(v) for k, v in self.__dict__.items()}


@dataclass
class Finding:
    kind: str  # dtype-changed, nan, inf, overflow, underflow, variant-disagreement, no-baseline, ...
    message: str
    op: str | None = None
    remedy: str | None = None

    def as_dict(self) -> dict:
        return dict(kind=self.kind, message=self.message, op=self.op, remedy=self.remedy)


@dataclass
class Judgement:
    status: str
    reason: str
    findings: list[Finding] = field(default_factory=list)
    effective_bits: float | None = None  # mantissa bits the error corresponds to (see effective_bits())


def mantissa_bits(dtype: torch.dtype) -> int:
    """Significand bits including the implicit one: fp16 11, bf16 8, fp32 24, fp64 53."""
    return int(round(-math.log2(torch.finfo(dtype).eps))) + 1


def effective_bits(m: Metrics, baseline: Metrics | None, dtype: torch.dtype) -> float | None:
    """The precision a cell's error corresponds to: the requested format's bits, less log2 of how many times the
    baseline's error it makes (rounding error scales as 2^-bits, and the baseline rounds at the requested bits)."""
    if baseline is None or not (0 < baseline.rel_l2 < math.inf) or not (0 < m.rel_l2 < math.inf):
        return None
    return mantissa_bits(dtype) - math.log2(m.rel_l2 / baseline.rel_l2)


def _format_like(bits: float) -> str:
    near = min(MANTISSA_BITS, key=lambda b: abs(b - bits))
    return f"~{bits:.0f}-bit-mantissa arithmetic ({MANTISSA_BITS[near]}?)" if abs(near - bits) <= 1.5 else (
        f"~{bits:.0f}-bit-mantissa arithmetic")


def _next_format_down(bits: float | None, precision: Precision) -> bool:
    """The error matches the next narrower format (a silent downgrade), not just any large error (a bug)."""
    want = mantissa_bits(precision.compute)
    return bits is not None and abs(bits - (want - NEXT_FORMAT_GAP.get(want, 3))) <= 1.5


def coarser_than_requested(m: Metrics, precision: Precision, baseline: Metrics | None,
                           narrowest_bits: int | None = None) -> Finding | None:
    """A cell under tolerance whose error says it computed in a narrower format than asked (rule above).
    `narrowest_bits`: the mantissa bits of the narrowest dtype the backend records computing in, when it records
    one. Not narrower than requested: the extra error is how it computes at that dtype (reductions or norm
    statistics accumulated there, where the baseline accumulates in float32), reported as rounds-more, a fact
    about the backend and not a downgrade."""
    bits = effective_bits(m, baseline, precision.compute)
    if bits is None or baseline is None or m.rel_l2 <= precision.unit_roundoff:
        return None
    want = mantissa_bits(precision.compute)
    limit = max(BASELINE_FACTOR, 2 ** (NEXT_FORMAT_GAP.get(want, 3) / 2))
    ratio = m.rel_l2 / baseline.rel_l2
    if ratio <= limit:
        return None
    if narrowest_bits is not None and narrowest_bits >= want:
        return Finding("rounds-more",
                       f"errors {ratio:.1f}x {precision.name}'s baseline (limit for a narrower format {limit:.3g}x), "
                       f"with no compiled op in a dtype narrower than {dtype_name(precision.compute)}: it rounds more "
                       "than the baseline at the same dtype (reductions or norm statistics accumulated in "
                       f"{dtype_name(precision.compute)} where the baseline accumulates in float32?)",
                       remedy="fpdiff locate finds the ops; keep them in fp32 (fpdiff plan) or use the backend's "
                       "higher-precision accumulation option if it has one")
    return Finding("coarser-than-requested",
                   f"errors {ratio:.1f}x {precision.name}'s baseline (limit {limit:.3g}x): computes like "
                   f"{_format_like(bits)}, not the {want} bits of {precision.name}",
                   remedy="check which precision the backend really used (its precision hints, "
                   "reduced-precision reductions, demotion flags); fpdiff locate finds where")


def json_float(v: object) -> object:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def ulp_size(ref: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Spacing of `dtype` at each |ref| (the distance to the next representable value)."""
    fi = torch.finfo(dtype)
    mant_bits = int(round(-math.log2(fi.eps)))
    mag = np.maximum(np.abs(ref), fi.tiny)  # below the smallest normal, the spacing is constant
    exp = np.floor(np.log2(mag))
    return np.exp2(exp - mant_bits)


def scaled_norm(x: np.ndarray) -> tuple[float, float]:
    """The L2 norm of `x` as (scale, norm of x / scale): squares of raw values underflow to 0 near 1e-160 and
    overflow to inf near 1e200, so the squares are taken on the output's own scale (its largest |value|)."""
    scale = float(np.abs(x).max()) if x.size else 0.0
    if scale == 0.0 or not math.isfinite(scale):
        return scale, float(scale != 0.0)
    return scale, l2(x / scale)


def l2(x: np.ndarray) -> float:
    """The L2 norm by numpy's pairwise sum, not BLAS: a process that has loaded a backend's runtime beside numpy's
    BLAS (OpenVINO converting a repro) was seen spinning for minutes in BLAS's dot on an array holding Inf."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        return float(np.sqrt(np.sum(np.square(np.asarray(x, dtype=np.float64)))))


def rel_l2(want: np.ndarray, got: np.ndarray) -> float:
    """||got - want|| / ||want|| of one pair of arrays, both scaled by the largest magnitude first so 1e-160 or 1e200
    neither underflows nor overflows when squared; exact agreement (NaN where NaN, same infinities) is 0, a shape
    change or a value finite in one and not the other inf. The one relative L2 of numpy arrays outside measure()
    (locate streams torch tensors its own way: activations too large to hold twice)."""
    if want.shape != got.shape:
        return float("inf")
    w, g = want.astype(np.float64), got.astype(np.float64)
    same = (w == g) | (np.isnan(w) & np.isnan(g))
    if same.all():
        return 0.0
    if not (np.isfinite(w) | same).all() or not (np.isfinite(g) | same).all():
        return float("inf")
    w, g = np.where(same, 0.0, w), np.where(same, 0.0, g)  # equal infinities out of the sums
    finite = np.where(np.isfinite(want), want, 0.0).astype(np.float64)
    scale = max(np.abs(finite).max(), np.abs(g).max())
    diff, ref = l2((g - w) / scale), l2(finite / scale)
    return float(diff / ref) if ref > 0 else float("inf")


def norm_ratio(a: tuple[float, float], b: tuple[float, float]) -> float:
    """|a| / |b| for two scaled norms, without forming either norm (each may lie outside the float64 range)."""
    if b[0] == 0.0:
        return 0.0 if a[0] == 0.0 else math.inf
    with np.errstate(over="ignore", under="ignore"):
        return float(np.float64(a[0]) / np.float64(b[0])) * (a[1] / b[1])


def is_discrete(a: np.ndarray) -> bool:
    """Integer and boolean outputs (argmax, masks, counts): judged by flips, not by a float norm (judge_flips)."""
    return np.asarray(a).dtype.kind in "biu"


def holds_integers(a: np.ndarray) -> bool:
    """A float output whose float64 values are all integers (its finite ones: round, floor, sign), so flips are what
    can differ: one tie broken the other way is a flip, not an error of 0.5 in relative L2."""
    a = np.asarray(a)
    if a.dtype.kind != "f" or a.size == 0:
        return False
    f = a[np.isfinite(a)]
    return bool(f.size) and bool(np.all(f == np.round(f)))


def _unequal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(a).ravel() != np.asarray(b).ravel()


def _unequal_float(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elements that differ, NaN equal to NaN."""
    a64, b64 = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    return ~((a64 == b64) | (np.isnan(a64) & np.isnan(b64)))


@dataclass(frozen=True)
class Comparator:
    """One way to compare an output with float64's and the outputs it claims, read off the float64 value: in a list of
    comparators the first that claims an output measures it (as torch.testing pairs inputs with the first pair class
    that takes them). `differs` gives the flipped elements; None measures by the float norms."""
    name: str
    claims: Callable[[np.ndarray], bool]
    differs: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None


DISCRETE = Comparator("integer or bool", is_discrete, _unequal)  # argmax, masks, counts: flips
INTEGER_VALUED = Comparator("integer-valued float", holds_integers, _unequal_float)  # round, floor, sign: flips
FLOATING = Comparator("float", lambda a: True, None)  # everything else: relative L2, ulps, cosine
# what every cell is measured by; the op sweep adds INTEGER_VALUED for ops whose float outputs hold integers
COMPARATORS: tuple[Comparator, ...] = (DISCRETE, FLOATING)
WITH_INTEGER_VALUED: tuple[Comparator, ...] = (DISCRETE, INTEGER_VALUED, FLOATING)


def pair(ref: list[np.ndarray], out: list[np.ndarray],
         comparators: Sequence[Comparator] = COMPARATORS) -> list[tuple[Comparator, np.ndarray, np.ndarray]]:
    """Each (float64 output, output) with the first comparator that claims it."""
    return [(next(c for c in comparators if c.claims(a)), a, b) for a, b in zip(ref, out)]


def measure(ref: list[np.ndarray], out: list[np.ndarray], ulp_dtype: torch.dtype,
            comparators: Sequence[Comparator] = COMPARATORS) -> Metrics:
    """Metrics over all float outputs together (flattened): the worst element and the aggregate both count.
    Outputs a flip comparator claims (integer and boolean ones by default) are counted apart: `flips` of
    `discrete` elements."""
    pairs = pair(ref, out, comparators)
    floats = [(a, b) for c, a, b in pairs if c.differs is None]
    discrete = [(d, a, b) for c, a, b in pairs if (d := c.differs) is not None]
    n_discrete = sum(int(np.asarray(a).size) for _, a, _ in discrete)
    flips = sum(int(np.count_nonzero(differs(a, b))) for differs, a, b in discrete)
    r = np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a, _ in floats]) if floats else np.zeros(0)
    o = np.concatenate([np.asarray(b, dtype=np.float64).ravel() for _, b in floats]) if floats else np.zeros(0)
    ref_finite = np.isfinite(r)
    nan = int(np.count_nonzero(np.isnan(o) & ~np.isnan(r)))
    inf = int(np.count_nonzero(np.isinf(o) & ~np.isinf(r)))
    both = ref_finite & np.isfinite(o)
    bad = int(np.count_nonzero(ref_finite & ~np.isfinite(o)))
    rf, of = r[both], o[both]
    if bad or rf.size == 0:
        inf_or_zero = math.inf if bad else 0.0
        return Metrics(inf_or_zero, inf_or_zero, inf_or_zero, math.nan if bad else 1.0,
                       -math.inf if bad else math.inf, inf_or_zero, inf_or_zero, inf_or_zero, nan, inf, int(r.size),
                       n_discrete, flips)
    with np.errstate(over="ignore", under="ignore"):  # |of - rf| beyond 1.8e308 is inf, and inf is the answer
        d = np.abs(of - rf)
    ref_n, err_n, out_n = scaled_norm(rf), scaled_norm(d), scaled_norm(of)
    tiny = float(torch.finfo(ulp_dtype).tiny)
    max_abs = float(d.max())
    with np.errstate(over="ignore", under="ignore"):
        max_rel = float((d / np.maximum(np.abs(rf), tiny)).max())
    rel_l2 = norm_ratio(err_n, ref_n)
    cosine = _cosine(rf, of, ref_n, out_n, err_n)
    snr_db = 20 * math.log10(1 / rel_l2) if 0 < rel_l2 < math.inf else (math.inf if rel_l2 == 0 else -math.inf)
    with np.errstate(over="ignore", under="ignore"):
        ulps = d / ulp_size(rf, ulp_dtype)
    max_ref = ref_n[0]
    max_norm = norm_ratio((max_abs, 1.0), (max_ref, 1.0))
    return Metrics(max_abs, max_rel, rel_l2, cosine, snr_db, float(ulps.max()), float(np.median(ulps)),
                   max_norm, nan, inf, int(r.size), n_discrete, flips)


def _cosine(rf: np.ndarray, of: np.ndarray, ref_n: tuple, out_n: tuple, err_n: tuple) -> float:
    """Cosine of reference and output, each on its own scale (the dot product of raw values under/overflows)."""
    if ref_n[0] == 0.0 or out_n[0] == 0.0:
        return 1.0 if err_n[0] == 0.0 else 0.0
    if not math.isfinite(out_n[0]):
        return math.nan
    return float(np.dot(rf / ref_n[0], of / out_n[0]) / (ref_n[1] * out_n[1]))


def repeat_difference(first: list[np.ndarray], others: list[list[np.ndarray]]) -> str | None:
    """How later runs of one compiled model differ from the first, bitwise (NaN equals NaN); None when identical."""
    worst, n_diff, total = 0.0, 0, 0
    for run in others:
        for a, b in zip(first, run):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape:
                return f"output shapes {list(a.shape)} vs {list(b.shape)}"
            same = (a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind == "f" else (a == b)
            n_diff += int(np.count_nonzero(~same))
            total += a.size
            if a.dtype.kind == "f" and (~same).any():
                d = np.abs(a - b)[~same]
                worst = max(worst, float(np.nanmax(d)) if np.isfinite(d).any() else math.inf)
    if not n_diff:
        return None
    return f"{n_diff} of {total} output values, max |difference| {worst:.3g}"


def range_findings(ref: list[np.ndarray], precision: Precision) -> list[Finding]:
    """Output values the precision cannot hold, judged on the float64 reference alone."""
    fi = torch.finfo(precision.compute)
    r = np.concatenate([np.abs(np.asarray(a, dtype=np.float64)).ravel() for a in ref])
    r = r[np.isfinite(r)]
    found = []
    over = int(np.count_nonzero(r > fi.max))
    if over:
        found.append(Finding("overflow", f"{over} reference output values exceed the {precision.name} maximum "
                             f"{fi.max:.4g} (largest {r.max():.4g})",
                             remedy="keep the producing ops in fp32 (fpdiff locate / plan), or rescale"))
    nz = r[r > 0]
    under = int(np.count_nonzero(nz < fi.smallest_normal))
    if under and under >= 0.01 * max(nz.size, 1):
        found.append(Finding("underflow", f"{under} of {nz.size} nonzero reference output values are below the "
                             f"smallest normal {precision.name} {fi.smallest_normal:.3g} (subnormal or flushed)",
                             remedy="keep the producing ops in fp32, or rescale the output"))
    return found


def judge_flips(flips: int, total: int, baseline_flips: int | None, precision_name: str) -> Judgement:
    """Verdict on integer and boolean outputs by the flip rule (see FLIP_FACTOR): pass only when none differs."""
    if not flips:
        return Judgement(PASS, f"{total} integer/boolean output values equal float64's" if total else "")
    what = f"{flips} of {total} integer/boolean output values differ from float64's"
    if baseline_flips is None:
        return Judgement(PRECISION_LOSS, f"{what}; no baseline", [_no_baseline()])
    limit = FLIP_FACTOR * baseline_flips + FLIP_SLACK
    if flips > limit:
        return Judgement(MISMATCH, f"{what}, the baseline's {baseline_flips} at {precision_name} (limit "
                         f"{FLIP_FACTOR:g}x + {FLIP_SLACK})")
    return Judgement(PRECISION_LOSS, f"{what}, in line with the baseline's {baseline_flips} at {precision_name}: "
                     "near ties the precision breaks either way")


RANK: dict[str, int] = {PASS: 0, PRECISION_LOSS: 1, MISMATCH: 2}


def judge(m: Metrics, precision: Precision, baseline: Metrics | None,
          narrowest_bits: int | None = None, loss_cause: str | None = None) -> Judgement:
    """Verdict for one finished cell: the worse of its float outputs' verdict and its integer outputs' (flips).
    `loss_cause`: what a precision loss within the baseline's error is due to, when the caller knows better than
    "the precision is too coarse" (the model's own casts, an exporter's float32 constants)."""
    if not m.discrete:
        return _judge_floats(m, precision, baseline, narrowest_bits, loss_cause)
    f = judge_flips(m.flips, m.discrete, baseline.flips if baseline is not None else None, precision.name)
    if not m.numel:
        return f
    j = _judge_floats(m, precision, baseline, narrowest_bits, loss_cause)
    worst = j if RANK.get(j.status, 3) >= RANK.get(f.status, 3) else f
    other = f if worst is j else j
    findings = j.findings + [x for x in f.findings if x.kind not in {y.kind for y in j.findings}]
    return Judgement(worst.status, f"{worst.reason}; {other.reason}", findings, j.effective_bits)


# A baseline this far from float64 (rel L2 of 1: the size of the answer itself) keeps no correct digit: the precision
# already fails the model there (PP-OCR's detector at fp16: a BatchNorm variance of 9.8e7 stored as inf makes the
# evaluator's output 0 and IREE's NaN); a cell that is non-finite beside it is the same failure, not a worse one.
NO_DIGITS = 0.5


def _judge_floats(m: Metrics, precision: Precision, baseline: Metrics | None,
                  narrowest_bits: int | None = None, loss_cause: str | None = None) -> Judgement:
    """Verdict on the float outputs: pass, precision-loss or mismatch, with the rule that decided it."""
    tol = precision.tolerance
    if math.isnan(m.rel_l2) or math.isnan(m.max_norm) or (baseline is not None and (
            math.isnan(baseline.rel_l2) or math.isnan(baseline.max_norm))):
        # NaN compares false with every limit, so it would slip through to whichever rule comes last
        return Judgement(ERROR, "internal error in fpdiff: the error metric is NaN (rel L2 "
                         f"{m.rel_l2}, worst element {m.max_norm}); no verdict is claimed on it")
    findings: list[Finding] = []
    if m.nan or m.inf:
        kinds = [("nan", m.nan), ("inf", m.inf)]
        for kind, n in kinds:
            if n:
                findings.append(Finding(kind, f"{n} output values are {kind.upper()} where float64 is finite"))
        if baseline is not None and (baseline.nan or baseline.inf):
            return Judgement(PRECISION_LOSS, f"non-finite outputs, as in the baseline at {precision.name}", findings)
        if baseline is None:
            findings.append(_no_baseline())
            return Judgement(PRECISION_LOSS, "non-finite outputs; no baseline to compare with", findings)
        if baseline.rel_l2 >= NO_DIGITS:  # a baseline with no correct digit left cannot make anything "worse"
            return Judgement(PRECISION_LOSS, f"non-finite outputs, where the baseline at {precision.name} is finite "
                             f"but has no correct digit left (rel L2 {baseline.rel_l2:.2e}): the precision fails this "
                             "model either way (a constant or value it cannot hold)", findings)
        return Judgement(MISMATCH, f"non-finite outputs where the baseline at {precision.name} is finite", findings)
    bits = effective_bits(m, baseline, precision.compute)
    if m.rel_l2 <= tol and (baseline is None or m.max_norm <= max(tol * 10, MAX_FACTOR * baseline.max_norm)):
        coarser = coarser_than_requested(m, precision, baseline, narrowest_bits)
        return Judgement(PASS, f"rel L2 {m.rel_l2:.2e} <= tolerance {tol:.0e}",
                         findings + ([coarser] if coarser else []), bits)
    if baseline is None:
        findings.append(_no_baseline())
        return Judgement(PRECISION_LOSS, f"rel L2 {m.rel_l2:.2e} > tolerance {tol:.0e}; no baseline", findings)
    if baseline.nan or baseline.inf or not math.isfinite(baseline.rel_l2):  # "within 4x of inf" would say nothing
        return Judgement(PRECISION_LOSS, f"rel L2 {m.rel_l2:.2e} > tolerance {tol:.0e}; the baseline at "
                         f"{precision.name} is not finite (the model overflows there), so nothing bounds this "
                         f"finite error but the tolerance: {loss_cause or precision.name + ' is too coarse here'}",
                         findings, bits)
    factor = BASELINE_FACTOR if m.numel >= SMALL_NUMEL else SMALL_BASELINE_FACTOR
    if m.rel_l2 > max(tol, factor * baseline.rel_l2):
        like = f"; computes like {_format_like(bits)}" if bits is not None and _next_format_down(bits, precision) \
            else ""
        return Judgement(MISMATCH, f"rel L2 {m.rel_l2:.2e} is {_ratio(m.rel_l2, baseline.rel_l2)} the baseline's "
                         f"{baseline.rel_l2:.2e} at {precision.name} (limit {factor:g}x){like}", findings, bits)
    if m.max_norm > max(tol * 10, MAX_FACTOR * baseline.max_norm):
        return Judgement(MISMATCH, f"worst element error {m.max_norm:.2e} (of max |ref|) is "
                         f"{_ratio(m.max_norm, baseline.max_norm)} the baseline's {baseline.max_norm:.2e} "
                         f"(limit {MAX_FACTOR:g}x): an error confined to few elements", findings, bits)
    return Judgement(PRECISION_LOSS, f"rel L2 {m.rel_l2:.2e} > tolerance {tol:.0e}, but within "
                     f"{factor:g}x the baseline's {baseline.rel_l2:.2e}: "
                     f"{loss_cause or precision.name + ' is too coarse here'}",
                     findings, bits)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "infinitely more than"


def _no_baseline() -> Finding:
    return Finding("no-baseline", "the reference implementation could not run this precision, so precision "
                   "loss cannot be told from a backend bug", remedy="compare with another backend at this precision")
