"""ExecuTorch: the torch program lowered as a phone ships it (`to_edge_transform_and_lower`, XNNPACK's partitioner by
default) and run by ExecuTorch's own runtime. What XNNPACK took and what fell back to ExecuTorch's CPU kernels, and
the dtype each op computed in, is read from the lowered program: the cell says it, and the dtype-changed rule reads
it. The partitioner is a flag: `--backend-flag executorch=partitioner=none` runs every op on the CPU kernels."""
from __future__ import annotations

import contextlib
import io
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fpdiff.backends.base import TORCH, TORCH_INPUTS, Artifact, Backend, Prepared, Repro, Task, TensorSpec
from fpdiff.backends.torch_ops import MOVES, count_op_dtypes, float_dtype, integer_placement, op_name, refused_op
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding
from fpdiff.core.errors import COMPILE, LOAD, Unsupported, UsageError, stage
from fpdiff.core.paths import write_whole
from fpdiff.core.precision import Precision

PRECISIONS = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
PARTITIONERS = ("xnnpack", "none")
XNNPACK, CPU = "XNNPACK", "ExecuTorch CPU kernels"
# ops that sum many products: on ExecuTorch's CPU kernels an fp16 one accumulates in fp16 (measured: an fp16 conv
# about 8x the rounding floor of an fp32 accumulation), where XNNPACK and GPU kernels accumulate in fp32
REDUCING = {"convolution", "mm", "bmm", "addmm", "linear", "matmul", "baddbmm", "_native_batch_norm_legit_no_training"}


def placement(edge: Any) -> dict[str, Any]:
    """Where each float op of a lowered program runs and in which dtype: {XNNPACK: {dtype: n}, CPU: {dtype: n}},
    the ops left on the CPU kernels by name, and the reducing ones among them computed in a low dtype."""
    gm = edge.exported_program().graph_module
    where: dict[str, Counter[str]] = {XNNPACK: Counter(), CPU: Counter()}
    left: Counter[str] = Counter()
    low_reducing: set[str] = set()
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if op_name(n) == "executorch_call_delegate":
            where[XNNPACK] += count_op_dtypes(getattr(gm, n.args[0].target).original_module.graph)
        elif op_name(n) not in MOVES and (dtype := float_dtype(n)) is not None:
            where[CPU][dtype] += 1
            left[op_name(n)] += 1
            if op_name(n) in REDUCING and dtype in ("float16", "bfloat16"):
                low_reducing.add(op_name(n))
    return {"ops": {k: dict(v) for k, v in where.items() if v}, "on_cpu_kernels": dict(left),
            "low_accumulation": sorted(low_reducing)}


def partitioner(flags: tuple[str, ...]) -> str:
    """The partitioner a cell lowers with: `partitioner=NAME` (the last one given), XNNPACK by default."""
    given = [f.removeprefix("partitioner=") for f in flags if f.startswith("partitioner=")]
    unknown = [f for f in flags if not f.startswith(("partitioner=", "float_modules="))]
    if unknown:
        raise UsageError(f"executorch takes --backend-flag executorch=partitioner={'|'.join(PARTITIONERS)} (or, in a "
                         f"quantized cell, executorch=float_modules=MODULE,MODULE); got {', '.join(unknown)}")
    name = given[-1] if given else "xnnpack"
    if name not in PARTITIONERS:
        raise UsageError(f"executorch partitioner {name!r}: known {', '.join(PARTITIONERS)}")
    return name


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """ExecuTorch's lowering prints its progress to stdout: it belongs to the cell's log, not to the report."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def lower(program: Any, how: str) -> Any:
    """The exported program lowered as ExecuTorch ships it: to the edge dialect with `how`'s partitioner."""
    from executorch.exir import to_edge_transform_and_lower
    parts = []
    if how == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        parts = [XnnpackPartitioner()]
    with _quiet():
        return to_edge_transform_and_lower(program, partitioner=parts)


def write_pte(program: Any, how: str, out: Path, read: Callable[[Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Lower and serialize `program` to `out` (a .pte); -> what `read` reads of the lowered program (default: where
    its ops run, placement)."""
    with stage(COMPILE, f"executorch to_edge_transform_and_lower ({how})"):
        try:
            edge = lower(program, how)
        except Exception as e:
            op = refused_op(str(e))
            if op is None:
                raise
            raise Unsupported(f"ExecuTorch lowers Core ATen ops only, and {op} is not one", op=op) from e
        placed = (read or placement)(edge)
    with stage(COMPILE, "executorch to_executorch"), _quiet():
        out.write_bytes(edge.to_executorch().buffer)
    return placed


def load_method(path: Path) -> Any:
    """The program's forward method, loaded by ExecuTorch's runtime."""
    from executorch.runtime import Runtime
    return Runtime.get().load_program(path).load_method("forward")


def _runner(method: Any) -> Any:
    """run(*inputs) of a loaded method: ExecuTorch takes contiguous tensors and returns a list of outputs."""
    def run(*inputs: Any) -> list[Any]:
        return list(method.execute([t.contiguous() for t in inputs]))
    return run


class ExecuTorchBackend(Backend):
    name = "executorch"
    kinds = frozenset({TORCH})
    shape_variants = False  # lowered at the example inputs' shapes (dynamic dims need upper bounds it is not given)
    takes_flags = True
    independent = True  # XNNPACK's and ExecuTorch's own kernels: a witness when the float64 judge is in doubt
    requires = ("executorch",)
    extra = "executorch"
    artifacts = (".pte",)

    def available(self) -> str | None:
        """Found, not imported: importing ExecuTorch loads torchao and its kernels, which belongs to a cell."""
        import importlib.util
        return None if importlib.util.find_spec("executorch") else \
            f"executorch is not installed ({self.how_to_install()})"

    def prepare_task(self, task: Task) -> Prepared:
        how = partitioner(task.flags)
        float_modules(task.flags, task.precision)  # refused here in one line
        p = task.precision
        if p.cast_dtype not in ("float32", "float16", "bfloat16") and not task.is_program:
            raise Unsupported(f"ExecuTorch runs a program in fp32, fp16 or bf16; {p.name} does not exist there",
                              dtype=p.name)
        if not task.is_torch:
            raise Unsupported("ExecuTorch lowers torch programs; this model is ONNX")

        placed: dict[str, Any] = {}

        def build(out: Path) -> None:
            placed.update(write_pte(self.export(task), how, out))
        pte, hit = task.cache.get_or_build(*task.key("executorch", how), suffix=".pte", build=build)
        record = pte.with_suffix(".placement.json")  # where the ops run: read from the lowered program, kept beside it
        if hit and record.exists():
            placed = json.loads(record.read_text())
        elif placed:
            write_whole(record, json.dumps(placed))
        else:  # a cached .pte whose record was lost: lowered again to read it
            placed = write_pte(self.export(task), how, pte)
            write_whole(record, json.dumps(placed))
        return self._prepared(pte, placed, how, p if not task.is_program else None)

    def _prepared(self, pte: Path, placed: dict[str, Any], how: str, want: Precision | None) -> Prepared:
        """The .pte loaded and run by ExecuTorch's runtime, with where its ops ran as the cell's record."""
        with stage(LOAD, "executorch runtime"):
            method = load_method(pte)
        counts: Counter[str] = Counter()
        for per in placed["ops"].values():
            counts.update(per)
        info = {"partitioner": how, "ops_by_runner": placed["ops"], "pte_bytes": pte.stat().st_size}
        if placed["on_cpu_kernels"]:
            info["on_cpu_kernels"] = placed["on_cpu_kernels"]
        notes = []
        if placed["low_accumulation"]:
            notes.append(Finding("low-accumulation", f"{', '.join(placed['low_accumulation'])} ran on {CPU}, which "
                                 "accumulate a low-precision sum in that precision (XNNPACK and GPU kernels "
                                 "accumulate in float32)", remedy="delegate these ops to XNNPACK, or keep them in "
                                 "fp32 (fpdiff plan --backend executorch)"))

        ran = {k: n for k, n in counts.items() if n}
        computed = next(iter(ran)) if len(ran) == 1 else None
        remedy = "XNNPACK takes no bf16: every op ran on the CPU kernels" if want is not None and want.is_bf16 else None
        return Prepared(_runner(method), computed, notes, info, op_dtypes=dict(counts) or None, dtype_remedy=remedy,
                        artifact=pte)

    def prepare_quantized(self, task: Task) -> Prepared:
        """The cell's fp32 program quantized as ExecuTorch's users quantize it for XNNPACK (PT2E with its
        XNNPACKQuantizer: static or dynamic int8), lowered with XNNPACK's partitioner and run by ExecuTorch's runtime.
        The quantized program is emulated from its QDQ ONNX graph; what ran in integers is read from the lowered
        program (each delegated compute op fed by dequantize ops is an XNNPACK integer kernel)."""
        scheme = task.precision.name
        if scheme not in QUANTIZERS:
            raise Unsupported(f"ExecuTorch's XNNPACK quantizer has no {scheme} path that keeps activations "
                              f"{'float' if scheme == 'int4-weight' else 'in ' + scheme}: it quantizes "
                              f"{' and '.join(QUANTIZERS)}", dtype=scheme)
        if not task.is_torch:
            raise Unsupported("ExecuTorch lowers torch programs; this model is ONNX", dtype=scheme)
        if task.given:
            raise Unsupported("fpdiff reads no scales from a quantized .pte: give the quantized .onnx, or let "
                              "ExecuTorch's quantizer make the cell", dtype=scheme)
        from fpdiff.model import pt2e
        made: dict[str, Any] = {}
        modules = float_modules(task.flags, task.precision)

        def build(out: Path) -> None:
            fp32 = task.at(prec.FP32)
            program = self.export(fp32)
            pt2e.known_modules(program, modules, "executorch")
            program = pt2e.quantize(program, xnnpack_quantizer(scheme, modules), task.calibration(),
                                    tuple(fp32.inputs()))
            pt2e.qdq_graph(program, task.cache.beside(out, ".qdq.onnx"), rows=xnnpack_rows(program))
            made.update(write_quantized_pte(program, out))
            write_whole(task.cache.beside(out, ".placement.json"), json.dumps(made))
        key = task.key("executorch-quantized", "modules-v1", scheme, task.calibration_digest())
        pte, _ = task.cache.get_or_build(*key, suffix=".pte", build=build)
        graph, record = pte.with_suffix(".qdq.onnx"), pte.with_suffix(".placement.json")
        if not graph.exists() or not record.exists():  # a cached .pte whose companions were lost: made again
            build(pte)
        placed = json.loads(record.read_text())
        with stage(LOAD, "executorch runtime"):
            method = load_method(pte)
        tool = quantizing_tool(scheme) + modules_said(modules, "set_filter_function")
        from fpdiff.onnxtools.quantize import float_graph
        # the fp32 program's ONNX graph names its tensors as the quantized program's does (both from its fx nodes):
        # the float model's own value of each quantized activation, for its drift and the plan's ranking
        quantized = {"graph": str(graph), "tool": tool, "component": "ExecuTorch's XNNPACKQuantizer (PT2E)",
                     **placed["integers"], **float_graph(task, pre=False)}
        info = {"quantized_by": tool, "scheme": SCHEMES[scheme], "run_by": "ExecuTorch runtime, XNNPACK delegate",
                "ops_by_runner": placed["ops"], "pte_bytes": pte.stat().st_size}
        return Prepared(_runner(method), info=info, artifact=pte, quantized=quantized)

    def read_artifact(self, path: Path) -> Artifact:
        """A .pte's forward method as its metadata declares it (a .pte names no inputs: input_0, input_1, ...)."""
        meta = load_method(path).metadata
        ins = [_spec(f"input_{i}", meta.input_tensor_meta(i)) for i in range(meta.num_inputs())]
        outs = [_spec(f"output_{i}", meta.output_tensor_meta(i)) for i in range(meta.num_outputs())]
        floats = sorted({s.dtype for s in ins + outs if "float" in s.dtype})
        precision = prec.of_dtype(floats[0] if len(floats) == 1 else None)
        why = f"its float inputs and outputs are {', '.join(floats) or 'none'}; a .pte does not say which dtype " \
              "its delegated ops compute in"
        return Artifact(str(path), ins, outs, precision, why)

    def prepare_artifact(self, task: Task, path: Path) -> Prepared:
        with stage(LOAD, "executorch runtime"):
            method = load_method(path)
        return Prepared(_runner(method), info={"pte_bytes": path.stat().st_size}, artifact=path)

    def repro(self, r: Repro) -> str | None:
        """The segment lowered as the cell lowered it, as segment.pte; the script needs executorch alone."""
        if r.onnx_segment:
            return None
        how = partitioner(r.flags)
        r.meta["placement"] = write_pte(r.program, how, r.out / "segment.pte")
        r.meta["partitioner"] = how
        inputs = TORCH_INPUTS.replace('program = torch.export.load(str(here / "segment.pt2"))\n', "")
        return inputs + '''from executorch.runtime import Runtime
method = Runtime.get().load_program(str(here / "segment.pte")).load_method("forward")
outs = method.execute([t.contiguous() for t in xt])
'''


# The quantized formats ExecuTorch's users make for XNNPACK, asked of its XNNPACKQuantizer
# (get_symmetric_quantization_config): int8 weights per channel symmetric, int8 activations per tensor asymmetric,
# calibrated by PT2E's MinMax observers (static), or measured at run time (dynamic).
QUANTIZERS = {"int8": {"is_per_channel": True}, "int8-dynamic": {"is_per_channel": True, "is_dynamic": True}}
SCHEMES = {
    "int8": "weights int8 per-channel symmetric, activations int8 per-tensor (calibrated) asymmetric, rounding half "
            "to even, calibration minmax on the calibration inputs (PT2E observers)",
    "int8-dynamic": "weights int8 per-channel symmetric, activations int8 at run time asymmetric, one range per "
                    "row (XNNPACK: each row of a linear's input, each batch item of a conv's, where the program "
                    "declares one per tensor), rounding half to even, calibration none (ranges measured at run time)",
}


def xnnpack_quantizer(scheme: str, float_modules: Sequence[str] = ()) -> Any:
    """ExecuTorch's XNNPACKQuantizer set for a format, as its documentation sets it; `float_modules` left float by its
    filter function (it quantizes only the nodes the filter keeps; its set_module_name takes no None yet)."""
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_module_name_filter,
        get_symmetric_quantization_config,
    )
    q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**QUANTIZERS[scheme]))
    if float_modules:
        inside = [get_module_name_filter(name) for name in float_modules]
        q.set_filter_function(lambda n: not any(f(n) for f in inside))
    return q


def float_modules(flags: Sequence[str], precision: Any) -> tuple[str, ...]:
    """The modules the user's flags have XNNPACKQuantizer leave float (`float_modules=A,B`), the partitioner flag set
    aside; one line in a cell that is not quantized."""
    from fpdiff.backends.base import quantizer_nodes
    mine = [f for f in flags if f.startswith("float_modules=")]
    return quantizer_nodes(mine, "executorch", ("float_modules",), precision)["float_modules"]


def modules_said(modules: Sequence[str], call: str) -> str:
    """The modules a PT2E quantizer's module filter left float, as a cell's "quantized by" says them."""
    if not modules:
        return ""
    return (f", {call} leaving {len(modules)} module{'s' * (len(modules) != 1)} float ({', '.join(modules[:4])}"
            f"{', ...' if len(modules) > 4 else ''})")


def xnnpack_rows(program: Any) -> list[int]:
    """How XNNPACK computes each dynamic quantizer's range: per batch item over C, H, W for a conv's input, per row
    of the last dim otherwise (executorch's QuantParams: num_nonbatch_dims 3 or 1), where the program declares one
    range per tensor. The emulation computes what XNNPACK runs."""
    from fpdiff.model.pt2e import dynamic_inputs
    return [3 if any("conv" in op for op in reached) else 1 for reached in dynamic_inputs(program)]


def quantizing_tool(scheme: str) -> str:
    """What quantized a cell, as its report says it."""
    import importlib.metadata as md
    args = ", ".join(f"{k}=True" for k in QUANTIZERS[scheme])
    return (f"torchao {md.version('torchao')} prepare_pt2e/convert_pt2e with executorch {md.version('executorch')} "
            f"XNNPACKQuantizer(get_symmetric_quantization_config({args}))")


def write_quantized_pte(program: Any, out: Path) -> dict[str, Any]:
    """A quantized program lowered with XNNPACK's partitioner into `out`; -> where its ops run and which compute
    ops XNNPACK ran in integers (torch_ops.integer_placement). The quantized kernels' out variants are registered
    first, as ExecuTorch's quantization docs have a user import them: a quantize op XNNPACK does not take (a conv
    whose weight is an activation, quantized per channel) runs on those kernels."""
    import executorch.kernels.quantized  # noqa: F401
    return write_pte(program, "xnnpack", out,
                     read=lambda edge: {**placement(edge), "integers": integer_placement(_lowered_graphs(edge))})


def _lowered_graphs(edge: Any) -> list[tuple[str, Any]]:
    """The graphs a lowered quantized program runs: each XNNPACK delegate's, and what stayed on the CPU kernels."""
    gm = edge.exported_program().graph_module
    graphs = [(XNNPACK, getattr(gm, n.args[0].target).original_module.graph) for n in gm.graph.nodes
              if n.op == "call_function" and op_name(n) == "executorch_call_delegate"]
    return [*graphs, (CPU, gm.graph)]


# ExecuTorch's ScalarType codes as numpy names (executorch.runtime reports dtypes as these codes)
_SCALAR = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
           11: "bool", 15: "bfloat16"}


def _spec(name: str, meta: Any) -> TensorSpec:
    """One tensor of a .pte's method metadata as a TensorSpec."""
    code = meta.dtype()
    return TensorSpec(name, tuple(meta.sizes()), _SCALAR.get(int(getattr(code, "value", code)), str(code)))
