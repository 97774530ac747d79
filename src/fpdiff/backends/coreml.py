"""Core ML: coremltools converts the exported program here, at compute_precision FLOAT32 or FLOAT16, and the cell
reports what the conversion did that changes numbers. Core ML predicts only on macOS: there a worker runs the same
backend to the end (`fpdiff worker --listen` on the Mac, `--backend-host coreml=MAC:PORT` here)."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.backends.base import TORCH, Artifact, Backend, Prepared, Task, TensorSpec
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding
from fpdiff.core.errors import IMPORT, LOAD, TORCH_EXPORT, Unsupported, stage
from fpdiff.model.graph import source_line

FP16_MAX = 65504.0
FP16_SMALLEST = 2.0 ** -24  # smallest subnormal: nonzero values below it become 0 in a FLOAT16 model
# Core ML ops that only move or name values: left out when counting what computes in which dtype
MOVES = {"const", "cast", "reshape", "transpose", "squeeze", "expand_dims", "slice_by_index", "slice_by_size",
         "split", "concat", "gather", "identity", "shape", "tile", "pad"}


def mil_ops(mlmodel: Any) -> list[Any]:
    """The converted program's operations, in order (nested blocks flattened)."""
    ops = []

    def walk(block: Any) -> None:
        for op in block.operations:
            ops.append(op)
            for b in getattr(op, "blocks", []):
                walk(b)
    for f in mlmodel._mil_program.functions.values():
        walk(f)
    return ops


def _dtype(op: Any) -> str | None:
    from coremltools.converters.mil.mil import types
    outs = [o for o in op.outputs if types.is_tensor(o.sym_type) or types.is_scalar(o.sym_type)]
    return types.builtin_to_string(outs[0].dtype) if outs else None


def _trace(op: Any) -> str:
    """The torch stack trace a Core ML op came from (coremltools keeps the exported node's)."""
    scopes = {str(k): v for k, v in (op.scopes or {}).items()}
    return (scopes.get("ScopeSource.EXIR_STACK_TRACE") or [""])[0] or ""


def op_dtypes(mlmodel: Any) -> dict[str, int]:
    """The converted program's arithmetic ops by the float dtype they compute in."""
    counts = Counter(_dtype(op) for op in mil_ops(mlmodel) if op.op_type not in MOVES)
    return {{"fp16": "float16", "fp32": "float32"}[k]: n for k, n in counts.items() if k in ("fp16", "fp32")}


def conversion_findings(program: Any, mlmodel: Any, fp16: bool) -> tuple[list[Finding], dict[str, Any]]:
    """What the conversion did that changes numbers: casts inserted, constants that overflow or flush in fp16,
    torch ops turned into several Core ML ops (whose intermediates then round at the model's dtype). The ops it
    kept in fp32 are op_dtypes(), which check's dtype-changed rule reads."""
    ops = mil_ops(mlmodel)
    compute = [op for op in ops if op.op_type not in MOVES]
    casts = sum(op.op_type == "cast" for op in ops)
    info: dict[str, Any] = {"casts": casts, "coreml_ops": dict(Counter(op.op_type for op in compute))}
    findings = []
    if fp16:
        kept = sorted({op.op_type for op in compute if _dtype(op) == "fp32"})
        if kept:
            info["kept_in_fp32"] = kept
        over = flushed = 0
        for t in list(program.state_dict.values()) + list(program.constants.values()):
            if hasattr(t, "is_floating_point") and t.is_floating_point():
                a = np.abs(t.detach().double().cpu().numpy())
                over += int((a > FP16_MAX).sum())
                flushed += int(((a > 0) & (a < FP16_SMALLEST)).sum())
        info.update(fp16_constant_overflow=over, fp16_constant_flush=flushed)
        if over:
            findings.append(Finding("overflow", f"{over} weight or constant values exceed fp16's 65504: the FLOAT16 "
                                    "model holds them as inf", remedy="keep the ops reading them in fp32 "
                                    "(coremltools op_selector) or rescale them"))
        if flushed:
            findings.append(Finding("underflow", f"{flushed} nonzero weight or constant values are below fp16's "
                                    "smallest subnormal (6e-8): the FLOAT16 model holds them as 0",
                                    remedy="keep the ops reading them in fp32, or rescale"))
        decomposed = _decomposed(program, compute)
        if decomposed:
            info["decomposed"] = decomposed
            findings.append(Finding("decomposed", "the converter turned " + "; ".join(
                f"{d['torch']} ({d['source']}) into {len(d['coreml'])} Core ML ops ({', '.join(d['coreml'])})"
                for d in decomposed[:5]) + ": their intermediates are fp16 too, unlike torch's fused kernel",
                remedy="fpdiff ranges shows whether the intermediates fit fp16; keep the op in fp32 if not"))
    if casts:
        info["casts_inserted"] = casts
    return findings, info


def _decomposed(program: Any, compute: list[Any]) -> list[dict[str, Any]]:
    """Torch ops that became several arithmetic Core ML ops, matched by the stack trace both carry."""
    torch_ops: dict[str, list[str]] = {}
    for n in program.graph.nodes:
        if n.op != "call_function" or not n.meta.get("stack_trace"):
            continue
        name = str(n.target).removeprefix("aten.").split(".")[0]
        torch_ops.setdefault(n.meta["stack_trace"].strip(), []).append(name)
    by_line: dict[str, list[str]] = {}
    for op in compute:
        by_line.setdefault(_trace(op).strip(), []).append(op.op_type)
    out = []
    for key, names in torch_ops.items():
        math = [n for n in names if n not in ("view", "_unsafe_view", "clone", "getitem", "transpose", "reshape")]
        coreml = by_line.get(key, [])
        if len(math) == 1 and len(coreml) > 1:
            out.append({"torch": math[0], "source": source_line(key).rsplit("/", 1)[-1], "coreml": coreml})
    return out


class CoreMlBackend(Backend):
    name = "coreml"
    kinds = frozenset({TORCH})
    shape_variants = False  # converted at the example inputs' shapes
    requires = ("coremltools",)
    extra = "coreml"
    artifacts = (".mlpackage", ".mlmodel")

    def available(self) -> str | None:
        """Found, not imported: importing coremltools prints its platform warnings, which belong to a cell's log."""
        import importlib.util
        found = importlib.util.find_spec("coremltools")
        return None if found else f"coremltools is not installed ({self.how_to_install()})"

    def reach(self) -> str | None:
        if sys.platform == "darwin":
            return None
        return ("converts only: Core ML predicts on macOS (`fpdiff worker --listen HOST:PORT` on a Mac, "
                "--backend-host coreml=HOST:PORT here); the conversion's findings stand without it")

    def prepare_task(self, task: Task) -> Prepared:
        import coremltools as ct
        p = task.precision
        if p.cast_dtype not in ("float32", "float16"):
            raise Unsupported(f"Core ML computes in fp32 or fp16 (compute_precision FLOAT32 / FLOAT16); {p.name} "
                              "does not exist there", dtype=p.name)
        if not task.is_torch:
            raise Unsupported("fpdiff converts torch programs to Core ML; this model is ONNX")
        program = self.export(task, fp32=True)  # the fp32 program: the precision is the conversion's job
        with stage(TORCH_EXPORT, "torch.export run_decompositions"):
            program = program.run_decompositions({})
        fp16 = p.cast_dtype == "float16"
        with stage(IMPORT, "coremltools.convert"):
            mlmodel = ct.convert(program, convert_to="mlprogram", skip_model_load=sys.platform != "darwin",
                                 compute_precision=ct.precision.FLOAT16 if fp16 else ct.precision.FLOAT32)
        notes, info = conversion_findings(program, mlmodel, fp16)
        info["coremltools"] = ct.__version__
        counts = op_dtypes(mlmodel)
        computed = "float16" if fp16 and not counts.get("float32") else None
        names = [i.name for i in mlmodel.get_spec().description.input]
        outputs = [o.name for o in mlmodel.get_spec().description.output]

        def run(*inputs: Any) -> list[Any]:
            if sys.platform != "darwin":
                raise Unsupported("Core ML predicts only on macOS: run `fpdiff worker --listen HOST:PORT` on a Mac "
                                  "and route to it (--backend-host coreml=HOST:PORT); the conversion findings "
                                  "stand without it", dtype=p.name)
            with stage(LOAD, "Core ML"):
                feeds = {n: t.float().numpy() if t.is_floating_point() else t.numpy() for n, t in zip(names, inputs)}
                result = mlmodel.predict(feeds)
            return [np.asarray(result[o]) for o in outputs]

        return Prepared(run, computed or ("float32" if not fp16 else None), notes, info, op_dtypes=counts,
                        dtype_remedy="keep fewer ops in fp32 (coremltools op_selector)" if fp16 else None)

    def read_artifact(self, path: Path) -> Artifact:
        """A Core ML model's declared inputs and outputs and, for an ML program, the dtype most of its arithmetic
        ops compute in (read from the program: no Mac needed)."""
        import coremltools as ct
        spec = ct.models.MLModel(str(path), skip_model_load=True).get_spec()
        counts = spec_op_dtypes(spec)
        top = max(counts, key=lambda d: counts[d]) if counts else "float32"
        why = (f"{counts.get(top, 0)} of {sum(counts.values())} arithmetic ops of its ML program compute in {top}"
               if counts else "no ML program to read: its inputs' dtype")
        low = top if top == "float16" else None  # a Core ML program computes in fp16 or fp32
        return Artifact(str(path), [_feature(f) for f in spec.description.input],
                        [_feature(f) for f in spec.description.output], prec.of_dtype(low), why)

    def prepare_artifact(self, task: Task, path: Path) -> Prepared:
        """The user's Core ML model: its op dtypes read here, its numbers only on macOS."""
        import coremltools as ct
        spec = ct.models.MLModel(str(path), skip_model_load=True).get_spec()
        names = [f.name for f in spec.description.input]
        outputs = [f.name for f in spec.description.output]

        def run(*inputs: Any) -> list[Any]:
            if sys.platform != "darwin":
                raise Unsupported("Core ML predicts only on macOS: run this check on a Mac (the op dtypes of the file "
                                  "are read here)", dtype=task.precision.name)
            with stage(LOAD, "Core ML"):
                result = ct.models.MLModel(str(path)).predict({n: t.numpy() for n, t in zip(names, inputs)})
            return [np.asarray(result[o]) for o in outputs]
        return Prepared(run, op_dtypes=spec_op_dtypes(spec) or None)


# Core ML's feature dtypes (ArrayFeatureType) and ML program dtypes (MIL DataType) as numpy's names
_FEATURE = {65552: "float16", 65568: "float32", 65600: "float64", 131104: "int32"}
_MIL = {10: "float16", 11: "float32", 12: "float64"}


def _feature(f: Any) -> TensorSpec:
    """One input or output of a Core ML model's description."""
    array = f.type.multiArrayType
    return TensorSpec(f.name, tuple(int(d) for d in array.shape),
                      _FEATURE.get(int(array.dataType), f"Core ML type {array.dataType}"))


def spec_op_dtypes(spec: Any) -> dict[str, int]:
    """A saved ML program's arithmetic ops by the float dtype they compute in (the same count as op_dtypes() on a
    converted program: data movement left out)."""
    counts: Counter[str] = Counter()
    for function in spec.mlProgram.functions.values():
        for block in function.block_specializations.values():
            for op in block.operations:
                dtype = _MIL.get(op.outputs[0].type.tensorType.dataType) if op.outputs else None
                if op.type not in MOVES and dtype:
                    counts[dtype] += 1
    return dict(counts)
