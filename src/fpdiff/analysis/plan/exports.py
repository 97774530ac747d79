"""The verified plan written for each target a user ships it to (`--export TARGET=PATH`): one small writer per target
(TARGETS), each file read back for the dtypes it computes in and run again where its numbers can be computed, judged
by the plan's tolerance against the plan's float64 outputs. A target that cannot express the plan writes nothing
and says why; the plan stands whatever happens to a file."""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fpdiff.analysis.plan.jobs import ProgramFile, ProgramTrials, error, failure
from fpdiff.analysis.plan.search import Export, ExportRun
from fpdiff.backends.base import ONNX
from fpdiff.core import precision as prec
from fpdiff.core.errors import MESSAGE_CHARS, StageError, Unsupported, UsageError, raised_by_fpdiff
from fpdiff.core.status import Status

# The Core ML op types coremltools' FP16ComputePrecision leaves alone, or that hold no arithmetic: never checked.
_COREML_SKIP = {"const", "cast"}
LITERT_REASON = ("LiteRT's converter cannot keep chosen ops in fp32 while the rest computes in fp16: "
                 "its fp16 option (target_spec.supported_types=[tf.float16]) only stores the weights in fp16 and "
                 "computes in fp32, and real fp16 arithmetic is XNNPACK's force-fp16, which takes the whole model; "
                 "the plan ships mixed as --export executorch=PATH.pte (XNNPACK) or onnx-typed")
NEEDS_TORCH = ("{what} converts the plan's torch program, and this plan is of an ONNX model; plan the "
               "model's torch source (a spec file) to export it here")


@dataclass
class Context:
    """What every writer reads: the plan's trials (its program, inputs, float64 outputs, jobs), its kept ops, its
    precision, and the backends known here."""
    reg: Any
    trials: ProgramTrials
    keep: frozenset[str]
    p: prec.Precision

    @property
    def is_torch(self) -> bool:
        return hasattr(self.trials, "gm")  # TorchTrials: the plan's torch program (an ONNX plan has a graph)

    @property
    def jobs(self):
        return self.trials.jobs


Writer = Callable[[Context, Path, Export], None]


def parse(specs: Iterable[str]) -> dict[str, str]:
    """`--export TARGET=PATH` options as {target: path}; a malformed one is one line."""
    out: dict[str, str] = {}
    for spec in specs:
        target, eq, path = spec.partition("=")
        if not eq:
            raise UsageError(f"--export {spec}: give TARGET=PATH (targets: {', '.join(TARGETS)})")
        if target.strip() in out:
            raise UsageError(f"--export {target.strip()} is given twice: one path per target")
        out[target.strip()] = path.strip()
    return out


def requested(exports: Mapping[str, str] | Iterable[str] | None, export_onnx: str | None) -> dict[str, str]:
    """The targets asked for ({target: path}, or TARGET=PATH strings; `export_onnx` is `onnx=PATH`), each known,
    its path of the target's kind and writable: refused in one line before any work."""
    wanted = dict(exports) if isinstance(exports, Mapping) else parse(exports or ())
    if export_onnx:
        if wanted.get("onnx", export_onnx) != export_onnx:
            raise UsageError(f"--export-onnx {export_onnx} and --export onnx={wanted['onnx']} name two paths")
        wanted["onnx"] = export_onnx
    for target, path in wanted.items():
        check(target, str(path))
    paths = [str(Path(p).resolve()) for p in wanted.values()]
    if len(set(paths)) < len(paths):
        raise UsageError("two --export targets name the same path")
    return {t: str(p) for t, p in wanted.items()}


def check(target: str, path: str) -> None:
    """One target's path: a known target, the file kind it writes, a folder it can be written in."""
    if target not in TARGETS:
        raise UsageError(f"--export {target}={path}: unknown target {target!r}; targets: {', '.join(TARGETS)}")
    suffix = SUFFIX[target]
    if not path or not path.endswith(suffix):
        raise UsageError(f"--export {target}={path}: {target} exports are {suffix} files")
    folder = Path(path).resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--export {target}={path}: cannot write there ({e.strerror or e})") from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--export {target}={path}: cannot write there (the folder is not writable)")


def write_all(reg, trials: ProgramTrials, keep: Iterable[str], p: prec.Precision,
              wanted: Mapping[str, str]) -> list[Export]:
    """Every export asked for, in the order asked."""
    ctx = Context(reg, trials, frozenset(keep), p)
    return [write(ctx, target, path) for target, path in wanted.items()]


def write(ctx: Context, target: str, path: str) -> Export:
    """One target's export; a file that cannot be written or a converter that refuses the program is its reason,
    an error of fpdiff's own code raises."""
    e = Export(target, path, tolerance=ctx.trials.tolerance)
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        TARGETS[target](ctx, out, e)
    except OSError as x:  # only the file could not be written
        e.reason = f"cannot write {path}: {x.strerror or x}"
    except (StageError, Unsupported) as x:  # a converter's failure, already charged to it
        e.reason = f"{target} conversion failed: {getattr(x, 'component', '') or target}: {_one_line(x)}"
    except Exception as x:
        if raised_by_fpdiff(x):
            raise
        e.reason = f"{target} conversion failed: {_one_line(x)}"
    e.verified = e.written and bool(e.runs) and all(r.passed for r in e.runs)
    if e.written and e.runs and not e.verified and not e.reason:
        e.reason = "; ".join(f"{r.backend}: {r.reason or f'error {r.error:.3g} over the tolerance'}"
                             for r in e.runs if not r.passed)
    return e


def _one_line(x: BaseException) -> str:
    text = " ".join(str(x).split())
    return f"{type(x).__name__}: {text[:MESSAGE_CHARS]}" if text else type(x).__name__


def _run(ctx: Context, e: Export, backend: str, program: Path, names: list[str], precision: prec.Precision,
         artifact: Path | None = None) -> None:
    """The exported file (`program`, or the converted `artifact` of the plan's program) as a job on `backend`,
    judged against the plan's float64 outputs; recorded on the export."""
    t = ctx.trials
    r = ctx.jobs.program(backend, ProgramFile(program, t.inputs, names, t.requires), precision=precision,
                         artifact=artifact)
    if r.status != Status.OK:
        e.runs.append(ExportRun(backend, precision.name, reason=f"{r.status}: {failure(r)}", op_dtypes=r.op_dtypes))
        return
    err = error(t.expected, r)
    e.runs.append(ExportRun(backend, precision.name, err, err <= t.tolerance, op_dtypes=r.op_dtypes))


def _scratch(ctx: Context, out: Path) -> Path:
    """A copy of the written file in the plan's scratch folder: what a backend writes beside it stays out of the
    user's folder."""
    copy = ctx.jobs.path("export", out.suffix)
    (shutil.copytree if out.is_dir() else shutil.copyfile)(out, copy)
    return copy


# --- onnx: fp32 in and out, Casts at the plan's borders ---------------------------------------------------------

def _onnx(ctx: Context, out: Path, e: Export) -> None:
    """The plan's ONNX graph as the trials ran it, verified on the plan's backend when it runs ONNX graphs, else on
    the backend that cross-checks ONNX models."""
    import onnx

    from fpdiff.onnxtools.graph import graph_inputs
    ctx.trials.export_onnx(ctx.keep, out)
    e.written = True
    model = onnx.load(str(out))
    e.op_dtypes = onnx_op_dtypes(model)
    verifier = (ctx.trials.backend if ONNX in ctx.reg.cls(ctx.trials.backend).kinds
                else ctx.reg.cross_check_for(ONNX))
    if verifier is None:
        e.reason = "not verified: no backend here runs ONNX graphs"
        return
    _run(ctx, e, verifier, _scratch(ctx, out), graph_inputs(model), prec.FP32)


def onnx_op_dtypes(model) -> dict[str, int]:
    """The graph's arithmetic nodes (moves and Casts aside) by the float dtype they compute in: float32 when one
    input is float32, else the low dtype of their inputs."""
    from onnx import TensorProto

    from fpdiff.onnxtools.graph import DATA_MOVEMENT, value_types
    names = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.BFLOAT16: "bfloat16",
             TensorProto.DOUBLE: "float64"}
    types = value_types(model)
    counts: dict[str, int] = {}
    for n in model.graph.node:
        if n.op_type in DATA_MOVEMENT:
            continue
        ins = {types.get(i) for i in n.input if i} & set(names)
        wide = next((t for t in (TensorProto.DOUBLE, TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16)
                     if t in ins), None)
        if wide is not None:
            counts[names[wide]] = counts.get(names[wide], 0) + 1
    return counts


# --- onnx-typed: the precision's dtype in and out, every value typed (TensorRT's strongly typed networks) ---------

def _onnx_typed(ctx: Context, out: Path, e: Export) -> None:
    """The plan's graph taking and giving the precision's dtype, Casts around the kept ops, every value's type in
    the graph (value_info): TensorRT's strongly typed mode builds what the graph says. Verified where that dtype is
    really computed: the judge of ONNX models (the reference evaluator: numpy computing each node in the graph's own
    dtypes, fp16 elementwise ops rounded per op, MatMul/Conv/reductions once after a float32 sum as GPU kernels do),
    fed the inputs in that dtype. ONNX Runtime's CPU provider is no judge of it: it runs fp16 nodes in fp32."""
    import onnx

    from fpdiff.onnxtools.export import ONNX_TYPE
    from fpdiff.onnxtools.graph import graph_inputs
    plain = ctx.jobs.path("plan", ".onnx")
    ctx.trials.export_onnx(ctx.keep, plain)
    low = ONNX_TYPE[prec.dtype_name(ctx.p.dtype)]
    onnx.save(typed_onnx(onnx.load(str(plain)), low), str(out))
    e.written = True
    back = onnx.load(str(out))
    e.op_dtypes = onnx_op_dtypes(back)
    untyped = untyped_values(back)
    wide = [v.name for v in [*back.graph.input, *back.graph.output] if v.type.tensor_type.elem_type ==
            onnx.TensorProto.FLOAT]
    e.check = (f"every value typed ({len(back.graph.value_info)} in value_info), inputs and outputs "
               f"{prec.dtype_name(ctx.p.dtype)}")
    if untyped or wide:
        e.check = "; ".join(([f"{len(untyped)} values untyped ({', '.join(untyped[:5])})"] if untyped else [])
                            + ([f"float32 inputs or outputs ({', '.join(wide[:5])})"] if wide else []))
        e.reason = f"not a strongly typed graph: {e.check}"
        return
    _run(ctx, e, ctx.reg.judge_for(ONNX), _scratch(ctx, out), graph_inputs(back), ctx.p)


def typed_onnx(model, low: int):
    """A copy of a plan's graph (float32 in and out, Casts at the plan's borders) whose float32 inputs and outputs
    are `low`, the Casts that only converted them dropped (a low input cast to fp32 and back is the input itself),
    and every value's type inferred into value_info (strict: a graph whose types do not check raises)."""
    import onnx

    from fpdiff.onnxtools.graph import value_types
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {t.name for t in g.initializer}
    types = value_types(model)  # the plan's graph's own types: a Cast's input type is read from them
    for vi in g.input:
        if vi.name not in inits and vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            _low_input(g, vi.name, low)
            vi.type.tensor_type.elem_type = low
    for vo in g.output:
        if vo.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            _low_output(g, vo.name, low, types)
            vo.type.tensor_type.elem_type = low
    del g.value_info[:]  # written again below, for the graph as it now is
    m = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    onnx.checker.check_model(m, full_check=True)
    return m


def _rename(g, old: str, new: str) -> None:
    """Every read of `old` (nodes, their subgraphs, the graph's outputs) made a read of `new`."""
    for n in g.node:
        n.input[:] = [new if i == old else i for i in n.input]
        for a in n.attribute:
            for sub in [a.g] if a.type == a.GRAPH else a.graphs:
                _rename(sub, old, new)
    for o in g.output:
        if o.name == old:
            o.name = new


def _cast_to(node) -> int | None:
    if node.op_type != "Cast":
        return None
    return next((a.i for a in node.attribute if a.name == "to"), None)


def _low_input(g, name: str, low: int) -> None:
    """A graph input made `low`: its readers that cast it to `low` read it as it is; the others read it cast to
    float32, as the plan's graph had it."""
    import onnx
    outputs = {o.name for o in g.output}
    wide = None
    for n in [n for n in g.node if name in n.input]:
        if _cast_to(n) == low and n.output[0] not in outputs:
            g.node.remove(n)
            _rename(g, n.output[0], name)
            continue
        if wide is None:
            wide = f"{name}_float32"
            g.node.insert(0, onnx.helper.make_node("Cast", [name], [wide], to=onnx.TensorProto.FLOAT,
                                                   name=f"{name}_to_float32"))
        n.input[:] = [wide if i == name else i for i in n.input]


def _low_output(g, name: str, low: int, types: Mapping[str, int]) -> None:
    """A graph output made `low`: a Cast to float32 of a `low` value that made it is dropped (its value is the
    output); else the output is the float32 value cast to `low`. An output no node makes (a graph input passed
    through) stays as it is, and the read-back check says so."""
    import onnx
    maker = next((n for n in g.node if name in n.output), None)
    if maker is None:
        return
    if maker is not None and _cast_to(maker) == onnx.TensorProto.FLOAT and types.get(maker.input[0]) == low:
        src = maker.input[0]
        producer = next((n for n in g.node if src in n.output), None)
        if producer is not None and src not in {o.name for o in g.output}:
            g.node.remove(maker)
            producer.output[:] = [name if o == src else o for o in producer.output]
            _rename(g, src, name)
            return
    inner = f"{name}_float32"
    for n in g.node:
        n.output[:] = [inner if o == name else o for o in n.output]
        n.input[:] = [inner if i == name else i for i in n.input]
    g.node.append(onnx.helper.make_node("Cast", [inner], [name], to=low, name=f"{name}_to_low"))


def untyped_values(model) -> list[str]:
    """Values the graph gives no element type: every node output must have one in a strongly typed graph."""
    g = model.graph
    typed = {v.name for v in [*g.value_info, *g.input, *g.output] if _typed(v.type)}
    typed |= {t.name for t in g.initializer}
    return [o for n in g.node for o in n.output if o and o not in typed]


def _typed(tp) -> bool:
    """A value type whose element type is known: a tensor's, or a sequence's or optional's element's."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return tp.tensor_type.elem_type != 0
    if kind in ("sequence_type", "optional_type"):
        return _typed(getattr(tp, kind).elem_type)
    return kind is not None


# --- coreml: coremltools' fp16 compute precision, the plan's ops kept fp32 by its op_selector --------------------

class Owners:
    """Which plan ops each Core ML op computes. coremltools names an op after the torch node it converts (its
    name, or its name and a suffix: linear_0, mean_axes_0, mul_cast_fp16) and keeps that node's stack trace; a name
    is taken only where the traces agree. An op named otherwise (the parts of a decomposed group_norm) belongs to
    every plan op of its stack trace."""

    def __init__(self, program, units: Iterable[str]) -> None:
        units = set(units)
        self.unit: dict[str, str] = {}  # program node -> the plan op it computes
        self.trace: dict[str, str] = {}
        self.by_trace: dict[str, set[str]] = {}
        for n in program.graph.nodes:
            if n.op != "call_function":
                continue
            self.trace[n.name] = (n.meta.get("stack_trace") or "").strip()
            unit = _origin(n, units)
            if unit is not None:
                self.unit[n.name] = unit
                self.by_trace.setdefault(self.trace[n.name], set()).add(unit)
        self.names = sorted(self.trace, key=len, reverse=True)  # the longest name first: mul_1 before mul

    def __call__(self, op) -> frozenset[str]:
        name = op.name.removesuffix("_cast_fp16").removeprefix("_inversed_")
        trace = _op_trace(op)
        for node in self.names:
            if name == node or name.startswith(node + "_"):
                if trace and self.trace[node] and trace != self.trace[node]:
                    continue  # another node's name prefix (add_0 of a group norm is no `add` of the model)
                return frozenset({self.unit[node]}) if node in self.unit else frozenset()
        return frozenset(self.by_trace.get(trace, ())) if trace else frozenset()


def _op_trace(op) -> str:
    """The torch stack trace coremltools keeps on a Core ML op (its EXIR_STACK_TRACE scope)."""
    scopes = {str(k): v for k, v in (op.scopes or {}).items()}
    return ((scopes.get("ScopeSource.EXIR_STACK_TRACE") or [""])[0] or "").strip()


def _op_dtype(op) -> str | None:
    """The dtype a Core ML op computes in, by its first tensor output: fp16, fp32, ..."""
    from coremltools.converters.mil.mil import types
    outs = [o for o in op.outputs if types.is_tensor(o.sym_type) or types.is_scalar(o.sym_type)]
    return types.builtin_to_string(outs[0].dtype) if outs else None


def _origin(n, units: set[str]) -> str | None:
    """The plan op a program node came from: the first name along its provenance (torch's from_node) that is one
    of the plan's ops, the node's own name first."""
    if n.name in units:
        return n.name
    src = n.meta.get("from_node") or []
    while src:
        if src[-1].name in units:
            return src[-1].name
        src = src[-1].from_node
    return None


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """Converters print progress bars and platform warnings: the export's own line says what matters."""
    import logging
    buf = io.StringIO()
    level = logging.root.manager.disable
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield buf
        finally:
            logging.disable(level)


def coreml_model(gm, inputs: tuple, fp32_ops: Iterable[str]):
    """The plan's program converted by coremltools at fp16 compute precision, every Core ML op of the ops in
    `fp32_ops` left in fp32 by FP16ComputePrecision's op_selector; and who owns each Core ML op. Converted from the
    program with every plan op in fp32 (the model's own fp32 weights), so the converter's selector alone decides."""
    import torch

    from fpdiff.model import mixed
    units = frozenset(n.name for n in mixed.units(gm))
    keep = frozenset(fp32_ops)
    with _quiet():  # importing coremltools warns about untested torch and scikit-learn versions
        import coremltools as ct
        program = torch.export.export(mixed.apply(gm, units, torch.float16), inputs,
                                      strict=False).run_decompositions({})
    owners = Owners(program, units)

    def fp16(op) -> bool:  # coremltools asks per op: True casts it to fp16
        return op.op_type in _COREML_SKIP or not (owners(op) & keep)
    with _quiet():
        model = ct.convert(program, convert_to="mlprogram", skip_model_load=sys.platform != "darwin",
                           compute_precision=ct.transform.FP16ComputePrecision(op_selector=fp16))
    return model, owners


def coreml_check(model, owners: Owners, keep: Iterable[str]) -> tuple[dict[str, int], list[str]]:
    """The converted program read back: its arithmetic ops by dtype, and what departs from the plan (an op of a
    kept plan op in fp16, an op of the others in fp32, a kept op with no Core ML op found)."""
    from fpdiff.backends.coreml import MOVES, mil_ops
    keep = set(keep)
    counts: dict[str, int] = {}
    wrong, found = [], set()
    for op in mil_ops(model):
        dt = _op_dtype(op)
        if op.op_type in MOVES or dt not in ("fp16", "fp32"):
            continue
        name = {"fp16": "float16", "fp32": "float32"}[dt]
        counts[name] = counts.get(name, 0) + 1
        own = owners(op)
        if not own:
            continue
        kept = bool(own & keep)
        found |= own & keep
        if (dt == "fp32") != kept:
            wrong.append(f"{op.op_type} {op.name} ({'/'.join(sorted(own))}) computes in {dt}, the plan "
                         f"{'keeps it in fp32' if kept else 'has it fp16'}")
    wrong += [f"kept {k} has no Core ML op here (fused into another?)" for k in sorted(keep - found)]
    return counts, wrong


def _coreml(ctx: Context, out: Path, e: Export) -> None:
    """The plan as an .mlpackage: coremltools' FP16ComputePrecision with the plan's ops kept fp32 by its
    op_selector, the converted program's dtypes read back and checked against the plan. Its numbers need macOS:
    verified here only on a Mac."""
    import importlib.util
    if not ctx.is_torch:
        e.reason = NEEDS_TORCH.format(what="coremltools")
        return
    if ctx.p.cast_dtype != "float16":
        e.reason = f"Core ML computes in fp32 or fp16; a {ctx.p.name} plan has no Core ML form"
        return
    if importlib.util.find_spec("coremltools") is None:
        e.reason = "coremltools is not installed (pip install 'fpdiff[coreml]')"
        return
    model, owners = coreml_model(ctx.trials.gm, ctx.trials.inputs, ctx.keep)
    if out.is_dir():  # an earlier export: coremltools writes the package anew
        shutil.rmtree(out)
    with _quiet():
        model.save(str(out))
    e.written = True
    e.op_dtypes, wrong = coreml_check(model, owners, ctx.keep)
    kept = e.op_dtypes.get("float32", 0)
    e.check = (f"the kept ops compute in fp32 and the rest in fp16 ({kept} Core ML ops fp32, "
               f"{e.op_dtypes.get('float16', 0)} fp16)")
    if wrong:
        e.check = f"{len(wrong)} Core ML ops depart from the plan: " + "; ".join(wrong[:4])
        e.reason = f"the converted program is not the plan: {e.check}"
        return
    if sys.platform != "darwin":
        e.reason = ("not verified: Core ML predicts only on macOS; run this plan on a Mac to verify the package "
                    "(a --backend-host coreml=HOST:PORT worker runs jobs, not this file: the coreml backend runs "
                    "no converted file of the user's)")
        return
    _coreml_predict(ctx, out, e)


def _coreml_predict(ctx: Context, out: Path, e: Export) -> None:
    """On a Mac: the written package's predictions on the plan's inputs, judged like every run."""
    import coremltools as ct
    import numpy as np
    t = ctx.trials
    try:
        with _quiet():
            model = ct.models.MLModel(str(out))
            spec = model.get_spec().description
            feeds = {i.name: np.asarray(x.float() if x.is_floating_point() else x)
                     for i, x in zip(spec.input, t.inputs)}
            got = model.predict(feeds)
        outputs = [np.asarray(got[o.name]) for o in spec.output]
    except Exception as x:  # Core ML's refusal of the package
        e.runs.append(ExportRun("coreml", ctx.p.name, reason=f"error: {_one_line(x)}"))
        return
    from fpdiff.analysis.plan.search import rel_l2
    err = rel_l2(t.expected, outputs)
    e.runs.append(ExportRun("coreml", ctx.p.name, err, err <= t.tolerance))


# --- executorch: the mixed program lowered to XNNPACK -----------------------------------------------------------

def _executorch(ctx: Context, out: Path, e: Export) -> None:
    """The plan's mixed program (kept ops in fp32, the rest at the precision) lowered with XNNPACK's partitioner as a
    .pte, where each op runs and in which dtype read from the lowered program; verified on ExecuTorch here: a job
    on the `executorch` backend runs the file as a user's own (Job.artifact)."""
    import importlib.util
    if not ctx.is_torch:
        e.reason = NEEDS_TORCH.format(what="ExecuTorch's exporter")
        return
    runner = artifact_runner(ctx.reg, out.suffix)
    if importlib.util.find_spec("executorch") is None or runner is None:
        e.reason = "executorch is not installed (pip install 'fpdiff[executorch]')"
        return
    import torch

    from fpdiff.backends.executorch import write_pte
    from fpdiff.model import mixed
    t = ctx.trials
    with _quiet():
        program = torch.export.export(mixed.apply(t.gm, ctx.keep, ctx.p.dtype), t.inputs, strict=False)
        placed = write_pte(program, "xnnpack", out)
    e.written = True
    for per in placed["ops"].values():
        for dtype, n in per.items():
            e.op_dtypes[dtype] = e.op_dtypes.get(dtype, 0) + n
    e.check = "; ".join(f"{where}: " + ", ".join(f"{n} {d}" for d, n in sorted(per.items()))
                        for where, per in placed["ops"].items())
    _run(ctx, e, runner, t.program(ctx.keep), t.input_names, ctx.p, artifact=_scratch(ctx, out))


def artifact_runner(reg, suffix: str) -> str | None:
    """The backend that runs a converted file of this suffix as a user's own (its `artifacts` declaration)."""
    return next((n for n in reg.names() if suffix in reg.cls(n).artifacts
                 and reg.cls(n).implements("prepare_artifact")), None)


# --- litert: nothing it can express --------------------------------------------------------------------------------

def _litert(ctx: Context, out: Path, e: Export) -> None:
    """LiteRT cannot compute chosen ops in fp32 beside fp16 ones: nothing is written, and the reason says why."""
    e.reason = LITERT_REASON


TARGETS: dict[str, Writer] = {"onnx": _onnx, "onnx-typed": _onnx_typed, "coreml": _coreml,
                              "executorch": _executorch, "litert": _litert}
SUFFIX = {"onnx": ".onnx", "onnx-typed": ".onnx", "coreml": ".mlpackage", "executorch": ".pte", "litert": ".tflite"}
