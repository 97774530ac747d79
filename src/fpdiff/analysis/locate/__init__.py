"""The op where a precision departs: per-op local and accumulated error against float64, in one streamed pass."""
from __future__ import annotations

import dataclasses
import math
import operator
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import torch
from torch.utils._pytree import tree_flatten, tree_map

from fpdiff.analysis.base import Result
from fpdiff.analysis.locate.artifact import judge_file, reading
from fpdiff.analysis.locate.bisection import Progress
from fpdiff.analysis.options import RunOptions
from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.errors import MESSAGE_CHARS, NoRepro, NotAnalysable, StageError, Unsupported, UsageError
from fpdiff.core.status import Status
from fpdiff.core.task import ONNX
from fpdiff.judging import markall
from fpdiff.judging.markall import MarkAll
from fpdiff.model import graph, segments
from fpdiff.model.float64 import float64_everywhere
from fpdiff.model.weights import cast_is_large
from fpdiff.runtime import rundir
from fpdiff.runtime.task import Job
from fpdiff.sources import load

if TYPE_CHECKING:
    from fpdiff.analysis.locate.quantized import QuantizedReading

# An op is the culprit when the error it makes by itself (fed float64-run inputs, computing at P) is over
# LOCAL_FACTOR times what P must lose on it anyway: the larger of (a) rounding its exact output to P and
# (b) computing it exactly from inputs rounded to P (the op's own conditioning), and at least one unit
# roundoff. A correct op at P lands within a few of that floor (sqrt(depth) growth of accumulation error in
# long reductions stays under 8 for depths up to ~64 when the accumulator is wider, as torch's CPU kernels are);
# a wrong or overflowing op lands orders of magnitude above it.
LOCAL_FACTOR = 8.0
# An op that flushes more than 1% of its nonzero float64 values to zero at P is an underflow suspect even when its
# L2 error is small: the flushed values are small by definition, and what reads them (a norm, a division) is not.
FLUSH_FRACTION = 0.01
# dtype conversions a model writes (`.to(torch.bfloat16)`, `.half()`, `.type_as(w)`): a culprit among them is the
# model's own cast, which the float64 run does not make (every float dtype argument is read as float64 there)
CASTS = {"aten.to.dtype", "aten._to_copy.default", "aten.to.dtype_layout", "aten.type_as.default",
         "aten.to.other", "prims.convert_element_type.default"}


@dataclass
class OpError:
    index: int
    node: str
    op: str
    stack: str  # nn.Module path
    source: str  # user file:line
    accumulated: float  # rel L2 of the P run's output vs float64
    local: float | None  # rel L2 of the op alone at P on float64 inputs (None: not examined, acc within floor)
    floor: float  # what P must lose on this op
    nonfinite: int  # non-finite values in the local output where float64 is finite
    ref_max: float
    flushed: float  # share of nonzero float64 values that P flushes to zero (below half its smallest subnormal)

    @property
    def cause(self) -> str:
        if not self.culprit:
            return "inherits" if self.accumulated > LOCAL_FACTOR * self.floor else "within floor"
        if self.nonfinite:
            return "overflow"
        if self.flushed >= FLUSH_FRACTION:
            return "underflow"
        # the model's own cast to a narrower format: the float64 run widens it (segments.widen), so it is named
        return "cast" if self.op in CASTS else "error"

    @property
    def ratio(self) -> float:
        if self.nonfinite:
            return math.inf
        if self.local is None:
            return 0.0
        return self.local / self.floor if self.floor > 0 else (0.0 if self.local == 0 else math.inf)

    @property
    def culprit(self) -> bool:
        return self.ratio > LOCAL_FACTOR

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["ratio"] = self.ratio if math.isfinite(self.ratio) else "inf"
        d["culprit"], d["cause"] = self.culprit, self.cause
        return d


@dataclass
class Segment:
    """The smallest run of ops a backend computes wrongly or refuses, as the bisection (or mark-all) found it."""
    status: Status  # its verdict or failing status, by the check rules
    reason: str
    ops: list[str]
    first_op: str | None
    start: int | None = None  # unit indices [start, end); None from mark-all
    end: int | None = None
    node: str | None = None
    module: str = ""
    source: str = ""
    rel_l2: float | None = None
    baseline_rel_l2: float | None = None
    stage: str | None = None
    component: str | None = None
    op_index: int | None = None  # the unit of the op named (first_op), narrowed inside the segment
    alone: dict | None = None  # that op cut out alone: its status, reason, rel L2 and the baseline's

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class LocateResult(Result):
    kind: ClassVar[str] = "locate"
    model: str
    backend: str
    precision: str
    ops: list[OpError] = field(default_factory=list)
    output_error: float | None = 0.0  # the requested backend's output error against float64 (None: it failed)
    eager_output_error: float | None = None  # torch eager's at the same precision, when it was run
    segment: Segment | None = None  # compiled backends: the smallest failing segment, its ops and verdict
    compiles: int = 0
    repro: str | None = None  # the repro script, when a bundle was written
    mark_all: MarkAll | None = None  # the backend's every-tensor-marked run: per tensor verdicts, first departure
    bisected: bool = False  # the segment bisection ran on the backend (not only the reference's op analysis)
    findings: list = field(default_factory=list)  # compare.Finding: a crash or refusal inside a segment
    artifact: dict | None = None  # --artifact: the user's file judged whole, and what the localization stands for
    quantized: QuantizedReading | None = None  # a quantized format: the backend's quantized cell, layer by layer

    @property
    def culprit(self) -> OpError | None:
        return next((o for o in self.ops if o.culprit), None)

    def answer(self) -> dict | None:
        """The culprit, one shape whatever found it: the backend's smallest failing segment, else torch eager's
        first op out of line."""
        if self.quantized is not None:
            return _quantized_answer(self)
        seg = self.segment
        if seg is not None:
            return {"op": seg.first_op, "node": seg.node, "module": seg.module, "source": seg.source,
                    "found_by": "mark-all" if self.mark_all is not None else "segment bisection",
                    "backend": self.backend, "stage": seg.stage or "run", "component": seg.component,
                    "status": seg.status, "cause": seg.status, "ops": seg.ops,
                    "evidence": {"reason": seg.reason, "segment": [seg.start, seg.end], "rel_l2": seg.rel_l2,
                                 "baseline_rel_l2": seg.baseline_rel_l2, "compiles": self.compiles,
                                 "op_index": seg.op_index, "op_alone": seg.alone}}
        c = self.culprit
        if c is None:
            return None
        return {"op": c.op, "node": c.node, "module": c.stack, "source": c.source, "found_by": "torch eager lockstep",
                "backend": "torch", "stage": "run", "component": "torch", "status": Status.PRECISION_LOSS,
                "cause": c.cause, "ops": [c.op],
                "evidence": {"local": c.local, "floor": c.floor, "ratio": c.ratio if math.isfinite(c.ratio) else "inf",
                             "accumulated": c.accumulated, "nonfinite": c.nonfinite, "flushed": c.flushed}}

    def exit_code(self, strict: bool = False) -> int:
        """Like check: a backend computing some ops wrongly fails the run; precision loss found on torch does not."""
        if self.quantized is not None:
            return self.quantized.exit_code()
        return 1 if self.segment else 0

    def as_dict(self) -> dict:
        return {"kind": self.kind, "model": self.model, "backend": self.backend, "precision": self.precision,
                "output_error": self.output_error, "eager_output_error": self.eager_output_error,
                "culprit": self.answer(), "segment": self.segment.as_dict() if self.segment else None,
                "compiles": self.compiles, "repro": self.repro,
                "mark_all": self.mark_all.as_dict() if self.mark_all else None,
                "findings": [f.as_dict() for f in self.findings],
                "ops": [o.as_dict() for o in self.ops],
                "quantized": self.quantized.as_dict() if self.quantized else None}

    def worst(self, n: int = 10) -> list[OpError]:
        return sorted(self.ops, key=lambda o: (-o.ratio if math.isfinite(o.ratio) else -1e300))[:n]


# Elements per chunk of the per-op metrics: 512 KB of float64, which stays in a core's L2 cache across the five
# passes made over it (copy, subtract, two norms, min/max), so the activation itself is read from memory once.
CHUNK = 1 << 16


class _Scratch:
    """One float64 buffer that each op's difference from float64 is written into, chunk by chunk, reused op after
    op: a fresh tensor the size of an activation per op costs more in page faults than the subtraction itself."""

    def __init__(self) -> None:
        self.buf = torch.empty(CHUNK, dtype=torch.float64)

    def stats(self, out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float, float, float]:
        """(||out - ref||, ||ref||, min(ref), max(ref)), the subtraction in float64 as `out.double() - ref` makes
        it, elementwise equal; the norms summed per chunk (they differ from one whole-tensor sum in the last ulp).
        On one thread: memory-bound passes over a chunk gain little from a second one, and on a busy machine every
        parallel region waits for a core that another process holds (5-20x slower, measured)."""
        n = ref.numel()
        r1, o1 = ref.reshape(-1), out.reshape(-1)
        acc = torch.empty(4, -(-n // CHUNK), dtype=torch.float64)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for j, i in enumerate(range(0, n, CHUNK)):
                r = r1[i:i + CHUNK]
                d = self.buf[:r.numel()]
                d.copy_(o1[i:i + CHUNK])  # two same-dtype passes: a mixed-dtype subtraction is ~10x slower
                d.sub_(r)
                torch.linalg.vector_norm(d, out=acc[0, j])
                torch.linalg.vector_norm(r, out=acc[1, j])
                torch.aminmax(r, out=(acc[2, j], acc[3, j]))
            return (float(torch.linalg.vector_norm(acc[0])), float(torch.linalg.vector_norm(acc[1])),
                    float(acc[2].min()) if n else 0.0, float(acc[3].max()) if n else 0.0)
        finally:
            torch.set_num_threads(threads)


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def _rel_l2(out: torch.Tensor, ref: torch.Tensor, scratch: _Scratch | None = None,
            stats: tuple[float, float, float, float] | None = None) -> tuple[float, int]:
    """Relative L2 over values finite in float64, and how many of those the output lost to NaN/Inf."""
    if stats is None and scratch is not None and out.shape == ref.shape and ref.dtype == torch.float64:
        stats = scratch.stats(out, ref)
    if stats is not None:
        num, den = stats[:2]
    else:
        num = float(torch.linalg.vector_norm(out.reshape(-1).double() - ref.reshape(-1)))
        den = float(torch.linalg.vector_norm(ref))
    if math.isfinite(num) and math.isfinite(den):  # no NaN/Inf anywhere (a norm would show it): no masks
        return _ratio(num, den), 0
    out, ref = out.reshape(-1).double(), ref.reshape(-1)
    finite = torch.isfinite(ref)
    bad = int((finite & ~torch.isfinite(out)).sum())
    if bad:
        return math.inf, bad
    o, r = out[finite], ref[finite]
    return _ratio(float(torch.linalg.vector_norm(o - r)), float(torch.linalg.vector_norm(r))), 0


def _max_abs(ref: torch.Tensor, stats: tuple[float, float, float, float] | None = None) -> float:
    """The largest finite |value|: from the min and max when every value is finite (a NaN or Inf would be the min
    or max), else masked."""
    if not ref.numel():
        return 0.0
    lo, hi = stats[2:] if stats is not None else (float(v) for v in torch.aminmax(ref))
    if math.isfinite(lo) and math.isfinite(hi):
        return max(abs(lo), abs(hi))
    fin = ref[torch.isfinite(ref)]
    return float(fin.abs().max()) if fin.numel() else 0.0


def _representation(ref: torch.Tensor, dtype: torch.dtype, scratch: _Scratch | None = None) -> tuple[float, float]:
    """Rounding error of P on the values it holds as normals, and the share of nonzero values it flushes to zero
    (below half its smallest subnormal). Values outside the normal range are not part of the floor: losing them
    is the op's failure at P."""
    fi = torch.finfo(dtype)
    a = ref.abs()
    smallest = float(torch.where(a > 0, a, math.inf).min()) if a.numel() else math.inf
    if float(a.max() if a.numel() else 0) <= fi.max and smallest >= fi.smallest_normal:  # all normal or zero
        err, _ = _rel_l2(ref.to(dtype), ref, scratch)
        return err, 0.0
    flush = fi.smallest_normal * fi.eps / 2
    nonzero = int(torch.count_nonzero(a))
    flushed = int(torch.count_nonzero((a < flush) & (a > 0))) / max(nonzero, 1)
    outside = (a > fi.max) | ((a < fi.smallest_normal) & (a > 0))
    keep = torch.isfinite(ref) & ~outside
    err, _ = _rel_l2(ref[keep].to(dtype), ref[keep]) if bool(keep.any()) else (0.0, 0)
    return err, flushed


def _floats(x) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]


def _cat(ts: list[torch.Tensor]) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1).double() for t in ts]) if ts else torch.zeros(0, dtype=torch.float64)


def _one(ts: list[torch.Tensor]) -> torch.Tensor:
    """An op's float outputs as one tensor: the output itself when there is one (no copy), else all flattened."""
    return ts[0].detach() if len(ts) == 1 else _cat(ts)


def _like(x, template):
    """x's tensors in the dtypes the same values have in `template` (the other run's), with the other run's
    non-tensor arguments (its dtypes, its subgraphs): one op's call as the other run makes it, on x's values."""
    flat_t = tree_flatten(template)[0]
    flat_x, spec = tree_flatten(x)
    out = []
    for a, b in zip(flat_x, flat_t):
        if isinstance(a, torch.Tensor):
            floats = isinstance(b, torch.Tensor) and a.is_floating_point() and b.is_floating_point()
            out.append(a.to(b.dtype) if floats else a)
        else:
            out.append(b)
    return torch.utils._pytree.tree_unflatten(out, spec)




def analyse(module: torch.nn.Module, inputs: tuple, p: prec.Precision, own: bool = False,
            program: torch.export.ExportedProgram | None = None,
            progress: Progress | None = None) -> tuple[list[OpError], float]:
    """Run float64 and P side by side op by op over ONE torch.export graph (the model at P, as a backend gets it),
    freeing values after their last use. The float64 run is that graph widened (segments.widen): every float op in
    float64, the model's own casts included, weights from the model cast to float64 as each op reads them. Two
    exports would not pair: a `.to(torch.float32)` is a copy in one and the input itself in the other, and a
    branch on the dtype can exist at one precision only. `own` is kept for callers: the caller's module is never
    changed (the float64 weights are cast per op from it, so no float64 copy of the model exists)."""
    if program is None:
        program = segments.export_at(module, inputs, p, graph.STATIC, None, lazy=_streamed(module, p))
    gmp = program.module()
    # two weight sets at most: the program's at P, and the caller's, read as float64 op by op (LazyCast)
    gm64 = segments.widen(gmp, graph.cast_module(module, prec.FP64, lazy=True))
    return _Lockstep(gm64, gmp, p, progress).run(inputs)


def _streamed(module: torch.nn.Module, p: prec.Precision) -> bool:
    """Whether the lockstep's program at P takes the model's own weights, cast as each op reads them: when a cast copy
    would be large (weights.LAZY_CAST_BYTES), so the run holds one set of weights."""
    return p.is_cast and cast_is_large(module, p.dtype)


class _Lockstep:
    """The two runs of one graph, node by node, with each op's error measured as it is made."""

    def __init__(self, gm64: torch.fx.GraphModule, gmp: torch.fx.GraphModule, p: prec.Precision,
                 progress: Progress | None) -> None:
        self.gm64, self.gmp, self.p, self.progress = gm64, gmp, p, progress
        # each float64 op also runs under the dispatch-level promotion (model/float64.py): what the graph's dtype
        # arguments do not show (an op's internal narrower compute, ops with no float64 kernel such as
        # torch._grouped_mm, computed by its float64 decomposition) is float64 too
        self.f64 = float64_everywhere()
        self.env64: dict[str, object] = {}
        self.envp: dict[str, object] = {}
        self.ops: list[OpError] = []
        self.out_err = 0.0
        self.scratch = _Scratch()

    def run(self, inputs: tuple) -> tuple[list[OpError], float]:
        n64, np_ = list(self.gm64.graph.nodes), list(self.gmp.graph.nodes)
        last_use: dict[str, int] = {}
        for i, n in enumerate(np_):
            for a in n.all_input_nodes:
                last_use[a.name] = i
        total = sum(n.op == "call_function" for n in np_)
        done, ph = 0, iter(inputs)
        with torch.no_grad():
            for i, (a, b) in enumerate(zip(n64, np_)):
                if b.op == "placeholder":
                    t = next(ph)
                    self.env64[b.name] = t.double() if t.is_floating_point() else t
                    self.envp[b.name] = (prec.cast_tensor(t, self.p) if self.p.is_cast else
                                         (t.float() if t.is_floating_point() else t))
                elif b.op == "get_attr":
                    self.env64[b.name] = segments.get_attr(self.gm64, a.target)
                    self.envp[b.name] = segments.get_attr(self.gmp, b.target)
                elif b.op == "call_function":
                    self.step(a, b)
                    done += 1
                    _tell(self.progress, "ops", done, total)
                elif b.op == "output":
                    outs64, outsp = self.args(a, b)
                    self.out_err, _ = _rel_l2(_one(_floats(outsp)), _one(_floats(outs64)).double(), self.scratch)
                elif b.op == "call_module" and str(b.target).startswith("_guards"):
                    pass  # export's input-shape guards: no arithmetic
                else:
                    raise NotAnalysable(f"locate cannot step through graph node {b.op} {b.target}")
                for name in [n.name for n in b.all_input_nodes if last_use.get(n.name) == i]:
                    self.env64.pop(name, None)
                    self.envp.pop(name, None)
        return self.ops, self.out_err

    def args(self, a: torch.fx.Node, b: torch.fx.Node) -> tuple:
        """The node's arguments in each run: its values for graph nodes, its constants otherwise."""
        return (tree_map(lambda x: self.env64[x.name] if isinstance(x, torch.fx.Node) else x, (a.args, a.kwargs)),
                tree_map(lambda x: self.envp[x.name] if isinstance(x, torch.fx.Node) else x, (b.args, b.kwargs)))

    def step(self, a: torch.fx.Node, b: torch.fx.Node) -> None:
        """One op in both runs, and its error when it makes floats (getitem only picks from a tuple measured)."""
        in64, inp = self.args(a, b)
        try:
            with self.f64:
                out64 = a.target(*in64[0], **in64[1])
        except (RuntimeError, Unsupported) as e:  # an op torch cannot compute in float64: say which
            path, src = graph.where(b)
            raise NotAnalysable(f"locate's float64 run cannot compute {b.target} (node {b.name}, module "
                             f"{path or '(root)'}, {src}): {' '.join(str(e).split())[:MESSAGE_CHARS]}") from e
        outp = b.target(*inp[0], **inp[1])
        self.env64[b.name], self.envp[b.name] = out64, outp
        r64 = _floats(out64)
        if r64 and b.target is not operator.getitem:
            self.measure(a, b, in64, inp, _one(r64).double(), _one(_floats(outp)))

    def measure(self, a: torch.fx.Node, b: torch.fx.Node, in64: tuple, inp: tuple, ref: torch.Tensor,
                out: torch.Tensor) -> None:
        """The op's accumulated error, and where that is out of line, its own error against its floor."""
        p = self.p
        same = out.shape == ref.shape and ref.dtype == torch.float64
        stats = self.scratch.stats(out, ref) if same else None
        acc, _ = _rel_l2(out, ref, self.scratch, stats)
        local, bad, flushed, floor = None, 0, 0.0, p.unit_roundoff
        if acc > LOCAL_FACTOR * floor:  # only then is the exact floor worth its passes over the data
            repr_err, flushed = _representation(ref, p.compute, self.scratch)
            floor = max(repr_err, p.unit_roundoff)
        # Examined only where something is off: an op whose accumulated error is within the floor
        # cannot be making much error of its own; skipping it keeps locate near one plain pass each.
        if acc > LOCAL_FACTOR * floor or flushed >= FLUSH_FRACTION:
            local_in = _like(in64, inp)
            local, bad = _rel_l2(_one(_floats(b.target(*local_in[0], **local_in[1]))), ref, self.scratch)
            if local > LOCAL_FACTOR * floor:  # maybe ill-conditioned: what exact math on P inputs loses
                rounded_in = _like(local_in, in64)  # P's inputs, float64 math
                with self.f64:
                    exact = a.target(*rounded_in[0], **rounded_in[1])
                cond, _ = _rel_l2(_one(_floats(exact)), ref, self.scratch)
                floor = max(floor, cond if math.isfinite(cond) else 0.0)
        path, src = graph.where(b)
        self.ops.append(OpError(len(self.ops), b.name, str(b.target), path, src, acc, local, floor, bad,
                                _max_abs(ref, stats), flushed))


@dataclass(frozen=True)
class LocateOptions:
    """locate's own options (what every analysis shares is RunOptions). `repro`: the folder of the repro bundle
    (None: none). `mark_all`: one run with every tensor an output, on a backend that implements it.
    `shape_variant`: segments keep this variant's dynamic dims. `artifact`: the user's converted file for
    `backend`, judged whole first (artifact.py)."""
    backend: str = "torch"
    precision: str = "fp16"
    device: str = "cpu"
    repro: str | None = None
    mark_all: bool = False
    shape_variant: str | None = None
    artifact: str | None = None
    calibration: str | None = None  # a quantized precision's calibration inputs (.npz, as quant's --calibration)


@rundir.scoped
def locate(model: str, options: LocateOptions | None = None, shared: RunOptions | None = None) -> LocateResult:
    """torch: the first op whose own error at the precision is out of line. Any other backend: the smallest segment of
    ops that the backend computes wrongly, by bisection over standalone segments. `shared.progress` is told each step
    (see Progress)."""
    o, shared = options or LocateOptions(), (shared or RunOptions()).ready()
    backend, precision, device, repro, progress = o.backend, o.precision, o.device, o.repro, shared.progress
    if isinstance(precision, str) and precision.strip().lower() in prec.QUANTIZED:
        return _quantized(model, o, shared)
    if o.artifact is not None:  # the user's file judged whole, then the source's ops located and read against it
        said = judge_file(model, o.artifact, backend, precision, shared)
        if said.finding is not None:  # nothing departs: nothing to locate
            return LocateResult(model, backend, prec.get(precision).name, output_error=said.rel_l2,
                                artifact=said.as_dict(), findings=[said.finding])
        result = locate(model, dataclasses.replace(o, artifact=None, mark_all=False, shape_variant=None), shared)
        result.artifact = said.as_dict()
        result.findings.insert(0, reading(said, result))
        return result
    p = prec.get(precision)
    from fpdiff.backends import judge_for
    from fpdiff.runtime.cache import run_folder
    reg, plugins, timeout = shared.registry, shared.plugins, shared.timeout
    cls = reg.cls(backend)  # unknown names fail before any work
    flags = shared.flags.get(backend, ())
    if o.mark_all and not cls.implements("prepare_marked"):
        can = ", ".join(n for n in reg.names() if reg.cls(n).implements("prepare_marked"))
        raise UsageError(f"--mark-all needs a backend that marks every tensor as an output in one run, which "
                         f"{backend} does not: use --backend {can}")
    source = load(model, **shared.load_args())
    variant = graph.STATIC
    if o.shape_variant:
        if source.ref.kind != "torch" or source.dynamic_shapes is None:
            raise UsageError("--shape-variant needs a torch model that declares dynamic_shapes()")
        variant = graph.find_variant(source.dynamic_shapes, o.shape_variant)
    cache = run_folder(shared.cache)  # False: no cache, as in check
    if o.mark_all:
        return _mark_all(source, Job(source.ref, "", backend, p, device, graph.STATIC, tuple(plugins), flags,
                                     cache), timeout, progress)
    from fpdiff.analysis.locate.bisection import Asking, Bisector, OnnxBisector
    ask = Asking(p, backend, device, tuple(plugins), flags, timeout, cache, progress)
    # the torch judge is torch eager itself: its culprit is the lockstep analysis's, computed here
    reference = source.ref.kind == "torch" and backend == judge_for("torch")
    if source.ref.kind not in cls.kinds:
        takes = ", ".join(n for n in reg.names() if source.ref.kind in reg.cls(n).kinds)
        raise UsageError(f"{backend} runs {' and '.join(sorted(cls.kinds))} models; for this {source.ref.kind} "
                         f"model use --backend {takes}")
    if source.ref.kind == "onnx":
        result = LocateResult(source.ref.label, backend, p.name)
        b = OnnxBisector(source.module, dict(zip(source.input_names, source.inputs)), ask)
    else:
        _tell(progress, "export", 0, 1)
        lazy = reference and _streamed(source.module, p)  # other backends' segments are cut from real weights
        try:  # the one graph both runs step through, and the one the segments are cut from
            static = segments.export_at(source.module, source.inputs, p, graph.STATIC, None, lazy=lazy)
            program = static if variant is graph.STATIC else segments.export_at(
                source.module, source.inputs, p, variant, source.dynamic_shapes)
        except StageError as e:
            return _export_failed(source.ref.label, backend, p, e)
        _tell(progress, "export", 1, 1)
        ops, out_err = analyse(source.module, source.inputs, p, own=reference, program=static, progress=progress)
        result = LocateResult(source.ref.label, backend, p.name, ops, out_err, eager_output_error=out_err)
        culprit = result.culprit
        if reference and not (repro and culprit and p.is_cast):
            return result
        b = Bisector(source.module, source.inputs, ask, variant, source.dynamic_shapes, program=program,
                     only=culprit.node if reference else None)
    try:
        if reference:  # the repro of a precision culprit: the op alone at P on float64-run inputs
            u = b.unit_of(culprit.node)
            _bundle(result, b, u, u + 1, Path(repro), limit=LOCAL_FACTOR * culprit.floor,
                    baseline_rel_l2=culprit.floor, backend_out=None)
            return result
        found = b.bisect()
        result.bisected = True
        result.compiles = len(b.asked)
        if b.count():
            whole = b.verdict(0, b.count())
            result.output_error = whole.rel_l2  # the requested backend's, not eager's
            if found is None:
                _nonfinite_baseline(result, p, whole.baseline_rel_l2)
        if found is not None:
            found, k, alone = b.narrow(found)
            result.compiles = len(b.asked)
            op, node, path, src = b.where(k)
            result.segment = Segment(found.status, found.reason, found.ops, op, found.start, found.end, node, path,
                                     src, found.rel_l2, found.baseline_rel_l2, found.stage, found.component, k,
                                     alone and {"status": alone.status, "reason": alone.reason,
                                                "rel_l2": alone.rel_l2, "baseline_rel_l2": alone.baseline_rel_l2})
            if repro:
                _bundle(result, b, found.start, found.end, Path(repro),
                        limit=max(p.tolerance, compare.BASELINE_FACTOR * found.baseline_rel_l2),
                        baseline_rel_l2=found.baseline_rel_l2, backend_out=found.outputs)
    finally:
        b.close()
    return _said(result, repro)


def _quantized(model: str, o: LocateOptions, shared: RunOptions) -> LocateResult:
    """A quantized format: its cell read layer by layer (quantized.py); what only float precisions take is one line."""
    asked = [n for n, v in (("--mark-all", o.mark_all), ("--shape-variant", o.shape_variant),
                            ("--artifact", o.artifact)) if v]
    if asked:
        raise UsageError(f"{' and '.join(asked)} locate float precisions; a quantized format is read layer by layer "
                         f"from its own cell (your quantized file: `fpdiff quant MODEL --artifact {o.backend}=PATH`)")
    if o.device != "cpu":
        raise UsageError(f"quantized formats run on the CPU here, not {o.device}")
    from fpdiff.analysis.locate.quantized import locate_quantized
    label, reading, cell = locate_quantized(model, o.backend, o.precision, o.calibration, shared)
    return LocateResult(label, o.backend, cell.precision,  # a quantized MODEL: its own format, whatever was asked
                        output_error=(cell.metrics or {}).get("rel_l2"),
                        findings=list(cell.findings), quantized=reading)


def _quantized_answer(result: LocateResult) -> dict | None:
    """The quantized culprit in locate's one shape: the first layer whose kernel departs from the emulation."""
    from fpdiff.judging.quantized import LOCAL_STEPS
    bad = result.quantized.departs_at
    if bad is None:
        return None
    return {"op": " + ".join(o.split(" ")[0] for o in bad["ops"]) or "QuantizeLinear", "node": bad["tensor"],
            "module": "", "source": "", "found_by": "quantized read-back", "backend": result.backend,
            "stage": "run", "component": result.backend, "status": Status.MISMATCH, "cause": Status.MISMATCH,
            "ops": bad["ops"], "evidence": {"steps": bad["steps"], "off": bad["off"], "values": bad["values"],
                                            "steps_beyond_float32": bad["beyond"], "bound_steps": LOCAL_STEPS,
                                            **_rewritten_by(result.quantized.optimizer or {}, bad["tensor"])}}


def _rewritten_by(effect: dict, tensor: str) -> dict:
    """The backend's graph optimization that, disabled alone, stops moving the departing kernel, where one does."""
    if tensor not in (effect.get("moves_quantized") or {}) or not effect.get("by_kernels"):
        return {}
    return {"optimizer_moves_it": effect["moves_quantized"][tensor], "rewritten_by": effect["by_kernels"]}


def _nonfinite_baseline(result: LocateResult, p: prec.Precision, baseline_rel_l2: float | None) -> None:
    """No segment departs from the baseline, but the baseline itself (the reference code at this precision) is not
    finite, or fails the precision's tolerance: nothing was shown right. The precision overflows on this model, or is
    too coarse for it, whatever the backend does."""
    if baseline_rel_l2 is None:
        return
    tol = p.tolerance
    if math.isfinite(baseline_rel_l2) and baseline_rel_l2 > tol:
        result.findings.insert(0, compare.Finding(
            "baseline-fails", f"{result.backend} agrees with the baseline at {result.precision}, and the baseline "
            f"itself is {baseline_rel_l2:.2e} from float64, over {result.precision}'s tolerance {tol:.0e}: the "
            "precision is too coarse for this model, and no op of the backend departs from what it must lose",
            op=None, remedy=f"fpdiff plan MODEL --precision {result.precision} finds the ops to keep in fp32"))
        return
    if math.isfinite(baseline_rel_l2):
        return
    result.findings.insert(0, compare.Finding(
        "baseline-nonfinite", f"{result.backend} agrees with the baseline at {result.precision} only in that both "
        f"are not finite: the model itself overflows (or makes NaN) in {result.precision}, so agreeing with the "
        "baseline shows nothing and no op of the backend was judged", op=None,
        remedy=f"fpdiff plan MODEL --precision {result.precision} keeps the overflowing ops in fp32 (on a torch model "
        f"fpdiff ranges MODEL shows where values leave {result.precision}'s range)"))


def _tell(progress: Progress | None, what: str, done: int, total: int | None) -> None:
    if progress is not None:
        progress(what, done, total)


def _said(result: LocateResult, repro: str | None) -> LocateResult:
    """A segment that failed without a verdict (a refusal, an error, a crash) leads the findings, with its remedy."""
    seg = result.segment
    if seg and seg.status not in (Status.MISMATCH, Status.PRECISION_LOSS, Status.PASS):
        remedy = (f"python {result.repro}" if result.repro else f"see {repro}" if repro else
                  "rerun with --repro DIR for a standalone repro")
        ops = f" (ops {', '.join(seg.ops)})" if seg.ops else ""
        result.findings.insert(0, compare.Finding(seg.status, f"{result.backend} {seg.status} at "
                                                  f"{seg.first_op or 'the whole graph'}{ops}: {seg.reason}",
                                                  op=seg.first_op, remedy=remedy))
    return result


def _bundle(result: LocateResult, b, start: int, end: int, out: Path, **kw) -> None:
    """The segment's repro bundle. Writing it compiles the segment again, which fails when the backend refuses it,
    and some backends write none for some segments: the located result stands either way, and what was written
    (the segment, inputs, expected values) is a note."""
    try:
        result.repro = str(b.bundle(start, end, out, **kw))
    except (StageError, Unsupported, NoRepro, UsageError, OSError, subprocess.CalledProcessError) as e:
        why = " ".join(str(e).split())[:MESSAGE_CHARS]
        result.findings.append(compare.Finding("note", f"repro bundle incomplete in {out}: {why}", op=None,
                                               remedy=f"the segment as exported is {out / 'segment.pt2'}"
                                               if (out / "segment.pt2").exists() else ""))


def _export_failed(model: str, backend: str, p: prec.Precision, e: StageError) -> LocateResult:
    """torch.export cannot trace the model at P: no backend gets a graph, and neither run has one to step through.
    That stage is the answer, as check reports the cell (`error` at torch.export), with the line it stopped at."""
    result = LocateResult(model, backend, p.name, output_error=None)
    result.segment = Segment(Status.ERROR, f"torch.export failed at {p.name}: {e}", [], None, stage=e.stage,
                             component=e.component)
    result.findings.append(compare.Finding(Status.ERROR, result.segment.reason, remedy="a branch on data or dtype "
                                           "stops torch.export; check runs the torch backend in eager"))
    return result


def _mark_all(source, job: Job, timeout: float, progress: Progress | None = None) -> LocateResult:
    """The backend with every tensor marked as an output: one run in a worker, fusion possibly changed (see
    judging/markall.py). A torch model runs as its ONNX graph exported at fp32, cast to the precision by the backend,
    so the judge and the backend mark the same tensors under the same names."""
    import onnx

    from fpdiff.backends import judge_for
    from fpdiff.onnxtools.export import export_program
    from fpdiff.onnxtools.graph import graph_inputs
    from fpdiff.runtime import jobdata
    from fpdiff.runtime.external import Router
    from fpdiff.sources import SourceRef, digest
    d = rundir.mkdtemp(prefix="fpdiff-markall-")
    if source.ref.kind == ONNX:
        model, ref, names, inputs = source.module, source.ref, source.input_names, source.inputs
        fingerprint = source.fingerprint
        own = onnx.load(ref.original) if ref.original else None
    else:
        path = d / "model.onnx"
        export_program(graph.export(source.module, source.inputs, prec.FP32, graph.STATIC, None), path)
        model, own = onnx.load(str(path)), None
        ref, names, inputs = SourceRef(ONNX, str(path), source.ref.label), graph_inputs(model), source.inputs
        fingerprint = digest(path.read_bytes(), source.fingerprint)
    data = jobdata.write(d / "inputs.pt", inputs=inputs, input_names=names, fingerprint=fingerprint)
    job = replace(job, source=ref, data_path=data)
    p = job.precision
    result = LocateResult(source.ref.label, job.backend, p.name)
    _tell(progress, "mark-all", 0, 1)
    with Router() as pool:
        result.mark_all = markall.mark_all(lambda j: pool.run(j, timeout), job, judge_for(ONNX), p,
                                           markall.producers(model, own))
    _tell(progress, "mark-all", 1, 1)
    found = result.mark_all
    first = found.first_departure
    if found.refused is not None:
        result.segment = Segment(found.status, found.refused, [], None, stage=found.stage, component=found.component)
    elif first:
        result.segment = Segment(first.status, first.reason, [f"{first.op} ({first.node})"], first.op,
                                 node=first.node, rel_l2=first.rel_l2, baseline_rel_l2=first.baseline_rel_l2)
    outputs = {o.name for o in model.graph.output}
    result.output_error = max((r.rel_l2 for r in found.rows if r.tensor in outputs), default=None)
    return _said(result, None)

