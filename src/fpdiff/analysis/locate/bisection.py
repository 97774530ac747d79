"""locate on any backend (ort, iree, inductor, plugins): bisect over standalone segments of the graph, each
compiled and run by the backend on float64-run inputs, judged like a check cell against torch eager."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from fpdiff.core import compare
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.core.task import ONNX, PROGRAM
from fpdiff.model import graph, segments
from fpdiff.model.weights import real
from fpdiff.runtime import jobdata, rundir
from fpdiff.runtime.external import Router
from fpdiff.runtime.task import Job
from fpdiff.sources import SourceRef, digest
from fpdiff.sources.program import op_modules


@dataclass
class SegmentVerdict:
    start: int
    end: int
    status: Status  # a compare verdict, or crash/unsupported/timeout from the worker
    reason: str
    ops: list[str] = field(default_factory=list)
    outputs: list | None = None  # the backend's outputs, kept for short segments (the repro bundle's)
    baseline_rel_l2: float = 0.0
    rel_l2: float | None = None  # the backend's error on the segment against float64 (None: it did not run)
    stage: str | None = None  # a failed segment: the stage and component that failed
    component: str | None = None


class Unrunnable(Exception):
    """A segment the baseline cannot run where the whole model runs: the cut fed it values the float64 run made."""


# An op departs inside a failing segment when its error is over the mismatch factor times the baseline's and over
# this many unit roundoffs: below ~8 roundoffs correct implementations differ by summation order alone
# (LOCAL_FACTOR in locate/__init__.py, the same bound for one op's own error).
DEPART_ULPS = 8.0

# What locate tells its `progress` callback as each step is done: (what, done, total or None when not known
# ahead). "export": the graph traced; "ops": ops of torch eager's streamed pass done; "segments": segments the
# bisection has compiled (how many it needs is known only at its end); "mark-all": the backend's one marked run.
Progress = Callable[[str, int, "int | None"], None]


def _signature(reason: str) -> str:
    """A failure message without paths, numbers and names of temporary files: what kind of failure it is."""
    import re
    text = re.sub(r"(/[\w.\-]+)+", "", reason)
    text = re.sub(r"\d+", "", text)
    return text[:160]


def _np(x) -> np.ndarray:
    """A float64 value as numpy: a weight's lazy cast (a node that only re-types a weight, as `w.to(x.dtype)` in an
    RMSNorm, holds the weight itself) is cast first, since numpy cannot read a tensor subclass."""
    x = real(x)
    return x.detach().double().numpy() if x.is_floating_point() else x.numpy()


@dataclass(frozen=True)
class Asking:
    """Whom a bisection asks about each segment, and how: the backend at the precision on the device, its plugins
    and flags, the seconds a segment may take, the compile cache, and where progress goes."""
    p: prec.Precision
    backend: str
    device: str = "cpu"
    plugins: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    timeout: float = 120.0
    cache: str | None = None
    progress: Progress | None = None


class Bisector:
    """Asks the backend about segments [start, end) of op units; remembers every answer (one compile each)."""

    def __init__(self, module: torch.nn.Module, inputs: tuple, ask: Asking, variant: graph.ShapeVariant = graph.STATIC,
                 declared=None, program: torch.export.ExportedProgram | None = None, only: str | None = None) -> None:
        if not ask.p.is_cast:
            raise UsageError("locate on compiled backends takes whole-model precisions (fp32, fp16, bf16, fp64)")
        self._setup(ask)
        p = ask.p
        # one export at P under the shape variant (segments keep its symbolic dims); the float64 values are that
        # same graph widened, so every node has its float64 value under its own name (segments.widen)
        self.gmp = (program or segments.export_at(module, inputs, p, variant, declared)).module()
        self.units = segments.units(self.gmp)
        self.requires = op_modules(self.gmp)  # every segment's custom ops are the graph's: found once
        keep = None  # `only`: the one unit holding that node is all that will be asked (a culprit's repro)
        if only is not None:
            _, ins, outs = segments.cut(self.gmp, list(self.units[self.unit_of(only)]))
            keep = set(ins) | set(outs)
        # float64 weights cast as each op reads them: no float64 copy of the model
        self.v64 = segments.values64(self.gmp, graph.cast_module(module, prec.FP64, lazy=True), inputs, keep)

    def _setup(self, ask: Asking) -> None:
        self.p, self.backend, self.device, self.progress = ask.p, ask.backend, ask.device, ask.progress
        self.plugins, self.flags, self.timeout, self.cache = ask.plugins, ask.flags, ask.timeout, ask.cache
        self.asked: dict[tuple[int, int], SegmentVerdict] = {}
        self.dir = rundir.mkdtemp(prefix="fpdiff-locate-")
        self.pool = Router()

    def close(self) -> None:
        self.pool.close()

    def count(self) -> int:
        return len(self.units)

    def segment(self, start: int, end: int):
        """The segment as a program at P, its inputs (float64-run values cast), float64 expected outputs and
        torch eager's outputs at P."""
        nodes = [n for u in self.units[start:end] for n in u]
        sub, in_names, out_names = segments.cut(self.gmp, nodes)
        ins = []
        for name in in_names:
            v, node = real(self.v64[name]), next(n for n in self.gmp.graph.nodes if n.name == name)
            if not isinstance(v, torch.Tensor):
                raise UsageError(f"segment input {name} is not a tensor ({type(v).__name__})")
            want = node.meta["val"].dtype if isinstance(node.meta.get("val"), torch.Tensor) else v.dtype
            ins.append(v.to(want) if v.is_floating_point() else v)
        expected = [_np(self.v64[n]) for n in out_names]
        try:
            with torch.no_grad():
                eager = [_np(t) for t in sub(*ins)]
        except Exception as e:  # noqa: BLE001 - torch eager's own refusal of the cut: a boundary of fpdiff's making
            raise Unrunnable(f"torch eager cannot run the segment at {self.p.name} on the float64 run's values "
                             f"({type(e).__name__}: {' '.join(str(e).split())[:200]}): integers computed in float64 "
                             f"meet ops computed at {self.p.name}; a boundary of the bisection's, not the backend's") \
                from e
        program = torch.export.export(sub, tuple(ins), strict=False,
                                      dynamic_shapes=segments.dynamic_dims(self.gmp, in_names))
        return nodes, program, ins, in_names, expected, eager

    def _job(self, start: int, end: int) -> tuple[Job, list, list, list[str]]:
        """The worker job for a segment, with float64 expected outputs, the baseline's outputs and op names."""
        nodes, program, ins, in_names, expected, eager = self.segment(start, end)
        path = self.dir / f"segment-{start}-{end}.pt2"
        torch.export.save(program, str(path))
        return (self._make_job(PROGRAM, path, ins, in_names, start, end, self.requires), expected, eager,
                [str(n.target) for n in nodes])

    def _make_job(self, kind: str, path: Path, ins: list, in_names: list[str], start: int, end: int,
                  requires: tuple[str, ...] = ()) -> Job:
        data = jobdata.write(self.dir / f"segment-{start}-{end}.inputs.pt", inputs=ins, input_names=in_names,
                             fingerprint=digest(path.read_bytes()))
        return Job(SourceRef(kind, str(path), f"ops {start}..{end - 1}", requires=requires), data, self.backend,
                   self.p, self.device, graph.STATIC, self.plugins, self.flags, self.cache)

    def verdict(self, start: int, end: int) -> SegmentVerdict:
        if (start, end) in self.asked:
            return self.asked[(start, end)]
        try:
            job, expected, eager, ops = self._job(start, end)
        except Unrunnable as e:  # no verdict on the backend: never a failing segment (fails), never the answer
            self.asked[(start, end)] = SegmentVerdict(start, end, Status.UNJUDGED, str(e))
            return self.asked[(start, end)]
        r = self.pool.run(job, self.timeout)
        if r.status != Status.OK:
            v = SegmentVerdict(start, end, r.status, r.message, ops, stage=r.stage, component=r.component)
        else:
            m, base, j = worst_output(expected, r.outputs, eager, self.p)
            v = SegmentVerdict(start, end, j.status, j.reason, ops, r.outputs if end - start <= 4 else None,
                               base.rel_l2, m.rel_l2)
        self.asked[(start, end)] = v
        if self.progress is not None:  # segments compiled so far; how many the search needs is known only after
            self.progress("segments", len(self.asked), None)
        return v

    def fails(self, start: int, end: int) -> bool:
        """Fails the way the whole graph does: a mismatch, or the same refusal or crash. A segment can also fail
        for reasons of its own (an importer that cannot take a cut-out op alone); chasing those would blame a
        boundary artifact instead of the op behind the whole graph's failure."""
        v = self.verdict(start, end)
        whole = self.verdict(0, self.count())
        failing = (Status.MISMATCH, Status.CRASH, Status.ERROR, Status.UNSUPPORTED, Status.TIMEOUT)
        if v.status != whole.status or v.status not in failing:
            return False
        return v.status == Status.MISMATCH or _signature(v.reason) == _signature(whole.reason)

    def bisect(self) -> SegmentVerdict | None:
        """Smallest failing segment: the shortest failing prefix fixes its end, then the latest start that
        still fails fixes its beginning. About 2*log2(ops) compiles."""
        n = self.count()
        if n == 0 or not self.fails(0, n):
            return None
        lo, hi = 1, n
        while lo < hi:
            mid = (lo + hi) // 2
            if self.fails(0, mid):
                hi = mid
            else:
                lo = mid + 1
        end = lo
        lo, hi = 0, end - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.fails(mid, end):
                lo = mid
            else:
                hi = mid - 1
        return self.verdict(lo, end)

    def departs(self, start: int, end: int) -> bool:
        """The segment's error is out of line with its baseline's, tolerance or not: non-finite where the baseline
        is finite, or over the mismatch factor times the baseline's and over LOCAL_FACTOR unit roundoffs (below
        that, two correct implementations differ by summation order alone). Inside a failing segment this finds
        an op whose error is still under the tolerance and is amplified past it by the ops after it."""
        v = self.verdict(start, end)
        if v.status == Status.MISMATCH:
            return True
        if v.rel_l2 is None:
            return False
        if v.rel_l2 == float("inf"):
            return v.baseline_rel_l2 != float("inf")
        return v.rel_l2 > max(compare.BASELINE_FACTOR * v.baseline_rel_l2, DEPART_ULPS * self.p.unit_roundoff)

    def narrow(self, found: SegmentVerdict) -> tuple[SegmentVerdict, int, SegmentVerdict | None]:
        """The op to blame in a failing segment [s, e), the segment to report, and the op's own verdict.
        A refusal or crash: the prefix search ended at e because ops 0..e-2 pass, so op e-1 is the one the backend
        refuses; alone, failing the same way, it is the segment. A mismatch: the first prefix of the segment that
        departs from its baseline ends at the op that starts the error (the ops after it may only amplify it)."""
        s, e = found.start, found.end
        if e - s == 1:
            return found, s, None
        if found.status != Status.MISMATCH:
            alone = self.verdict(e - 1, e)
            same = alone.status == found.status and _signature(alone.reason) == _signature(found.reason)
            return (alone if same else found), e - 1, alone
        lo, hi = s + 1, e
        while lo < hi:
            mid = (lo + hi) // 2
            if self.departs(s, mid):
                hi = mid
            else:
                lo = mid + 1
        k = lo - 1
        alone = self.verdict(k, k + 1)
        return (alone if alone.status == Status.MISMATCH else found), k, alone

    def where(self, unit: int) -> tuple[str, str, str, str]:
        """(op, graph node, nn.Module path, user source line) of a unit's first op with a value (an assertion held
        with it is not the op)."""
        node = next((n for n in self.units[unit] if n.meta.get("val") is not None), self.units[unit][0])
        path, src = graph.where(node)
        return str(node.target), node.name, path, src

    def unit_of(self, node_name: str) -> int:
        return next(i for i, u in enumerate(self.units) if any(n.name == node_name for n in u))

    def bundle(self, start: int, end: int, out: Path, *, limit: float, baseline_rel_l2: float,
               backend_out: list | None) -> Path:
        from fpdiff.analysis.locate import repro
        from fpdiff.core.versions import report_versions as versions
        nodes, program, ins, _, expected, _ = self.segment(start, end)
        title = f"{self.backend} at {self.p.name}, ops {start}..{end - 1}: {', '.join(str(n.target) for n in nodes)}"
        return repro.write(out, self._where(versions()), title, (program, ins, expected), backend_out,
                           baseline_rel_l2, limit)

    def _backend(self):
        from fpdiff.backends import registry
        return registry(self.plugins).create(self.backend)

    def _where(self, versions: dict):
        """Where this bisection's bundles run (locate/repro.py)."""
        from fpdiff.analysis.locate import repro
        return repro.Where(self._backend(), self.p, self.device, self.flags, versions)


class OnnxBisector(Bisector):
    """The same bisection over an ONNX graph's nodes; the judge is the ONNX reference evaluator in float64 and
    the baseline the evaluator on the segment cast to P."""

    def __init__(self, model, feeds: dict, ask: Asking) -> None:
        import onnx

        from fpdiff.onnxtools.export import ONNX_TYPE, cast_model
        from fpdiff.onnxtools.graph import float64_values
        p = ask.p
        if not p.is_cast or p.is_bf16:
            raise UsageError("locate on ONNX models takes fp64, fp32 or fp16")
        self.model64 = onnx.shape_inference.infer_shapes(cast_model(model, ONNX_TYPE["float64"]))
        self.modelp = onnx.shape_inference.infer_shapes(cast_model(model, ONNX_TYPE[prec.dtype_name(p.dtype)]))
        self.v64 = float64_values(self.model64, feeds)  # the model or its inputs are at fault if this fails
        self.nodes = list(self.modelp.graph.node)
        self.inits = {t.name for t in self.modelp.graph.initializer}
        self._setup(ask)

    def count(self) -> int:
        return len(self.nodes)

    def segment_model(self, start: int, end: int):
        import onnx.utils

        from fpdiff.onnxtools.mixed import reads
        inside = self.nodes[start:end]
        produced = {o for n in inside for o in n.output}
        inputs = list(dict.fromkeys(i for n in inside for i in reads(n) if i not in produced and i not in self.inits))
        used_after = {i for n in self.nodes[end:] for i in reads(n)} | {o.name for o in self.modelp.graph.output}
        outputs = [o for n in inside for o in n.output if o in used_after] or [inside[-1].output[0]]
        if any(len(reads(n)) > len([i for i in n.input if i]) for n in inside):
            sub = self._cut(inside, inputs, outputs)  # the extractor follows explicit inputs only
        else:
            sub = onnx.utils.Extractor(self.modelp).extract_model(inputs, outputs)
        # IR 3 (a model kept at its old opset) wants every weight listed as a graph input; the segment lists only
        # the values it is fed, so it is written under IR 4, where weights are constants of the graph
        sub.ir_version = max(sub.ir_version, 4)
        return sub, inputs, outputs

    def _cut(self, inside: list, inputs: list[str], outputs: list[str]):
        """The segment as a graph of its nodes in order, fed `inputs`, with the weights its nodes (and their
        subgraphs) read: for segments holding control flow, whose branches read outer values implicitly."""
        from onnx import helper

        from fpdiff.onnxtools.mixed import reads
        g = self.modelp.graph
        types = {vi.name: vi for vi in [*g.input, *g.value_info, *g.output]}
        used = {i for n in inside for i in reads(n)}

        def vi(name: str):
            return types[name] if name in types else helper.make_empty_tensor_value_info(name)
        graph = helper.make_graph(inside, "segment", [vi(i) for i in inputs], [vi(o) for o in outputs],
                                  initializer=[t for t in g.initializer if t.name in used])
        return helper.make_model(graph, opset_imports=list(self.modelp.opset_import), ir_version=self.modelp.ir_version)

    def segment_io(self, start: int, end: int):
        """The segment's sub-model, its input names, inputs (float64-run values cast to P), float64 expected."""
        sub, in_names, out_names = self.segment_model(start, end)
        dtype = np.dtype(prec.dtype_name(self.p.dtype))
        ins = [self.v64[n].astype(dtype) if self.v64[n].dtype.kind == "f" else self.v64[n] for n in in_names]
        return sub, in_names, ins, [np.asarray(self.v64[n], dtype=np.float64) for n in out_names]

    def _job(self, start: int, end: int):
        import onnx
        from onnx.reference import ReferenceEvaluator

        from fpdiff.onnxtools.graph import float64_ops  # the judge's kernels: the baseline is the judge's code at P
        sub, in_names, ins, expected = self.segment_io(start, end)
        with np.errstate(all="ignore"):  # overflow at the precision is what is measured, not a warning to print
            baseline = [np.asarray(a, dtype=np.float64) for a in
                        ReferenceEvaluator(sub, new_ops=float64_ops()).run(None, dict(zip(in_names, ins)))]
        path = self.dir / f"segment-{start}-{end}.onnx"
        onnx.save(sub, str(path))
        return (self._make_job(ONNX, path, ins, in_names, start, end), expected, baseline,
                [f"{n.op_type} ({n.name})" for n in self.nodes[start:end]])

    def where(self, unit: int) -> tuple[str, str, str, str]:
        """(op, node name, module path, source line): ONNX nodes have no module or source."""
        return self.nodes[unit].op_type, self.nodes[unit].name, "", ""

    def bundle(self, start: int, end: int, out: Path, *, limit: float, baseline_rel_l2: float,
               backend_out: list | None) -> Path:
        from fpdiff.analysis.locate import repro
        from fpdiff.core.versions import report_versions as versions
        sub, _, ins, expected = self.segment_io(start, end)
        title = f"{self.backend} at {self.p.name}, ONNX nodes {start}..{end - 1}"
        return repro.write(out, self._where(versions()), title, (sub, ins, expected), backend_out,
                           baseline_rel_l2, limit)


# the order in which a segment's outputs speak for it: a failing one first
_SEVERITY = {Status.MISMATCH: 0, Status.PRECISION_LOSS: 1, Status.PASS: 2}


def worst_output(expected: list, got: list, eager: list, p) -> tuple:
    """(metrics, baseline metrics, judgment) of the segment's worst output, each output judged on its own: flattened
    together, a large output (an attention mask's -3.4e38) drowns a small one that departs, and a prefix that
    computes its last op wrongly reads as a pass."""
    if len(expected) <= 1 or len(got) != len(expected) or len(eager) != len(expected):
        m, base = compare.measure(expected, got, p.compute), compare.measure(expected, eager, p.compute)
        return m, base, compare.judge(m, p, base)
    judged = []
    for i, (e, g, b) in enumerate(zip(expected, got, eager)):
        m, base = compare.measure([e], [g], p.compute), compare.measure([e], [b], p.compute)
        judged.append((i, m, base, compare.judge(m, p, base)))
    i, m, base, j = min(judged, key=lambda t: (_SEVERITY.get(t[3].status, 0), -_finite(t[1].rel_l2)))
    return m, base, dataclasses.replace(j, reason=f"output {i} of {len(expected)}: {j.reason}")


def _finite(x: float) -> float:
    return x if x == x else float("inf")  # NaN ranks as the worst
