"""IREE: torch programs through the FX importer, ONNX graphs through iree-import-onnx; llvm-cpu or cuda.

How a failed iree-compile is charged (compile_failure), one rule for the whole stage, read from what it prints with
the failed pass's IR (DIAGNOSE):
- it says it has no lowering for an op of the model ("failed to legalize operation", on the op or on a constant it
  takes, a torch.aten / torch.torchvision op then left in the failed pass's IR) or no math function for its dtype
  ("undefined symbol: tanh" at f64): `unsupported`, naming that op, the refusal of something the model contains;
- it rejects the IR it was given (a parse or verifier error on the input file, before any pass runs: no pass's IR is
  printed): `error` at import, charged to the importer that wrote that IR (iree-import-onnx, IREE's FX importer or
  iree-turbine), never to the compiler or the model;
- anything else (a verifier error on IR one of its own passes made, an op of its own pipeline left behind, a crash):
  `error` (or `crash`) at compile, charged to iree-compile: the compiler failed without declaring a refusal.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fpdiff.backends import to_numpy as _to_numpy
from fpdiff.backends.base import NUMPY_INPUTS, ONNX, TORCH, Backend, Prepared, Repro, Task, reading_back
from fpdiff.core.dtypes import mixed_dtype
from fpdiff.core.errors import (
    COMPILE,
    IMPORT,
    LOAD,
    MESSAGE_CHARS,
    TORCH_EXPORT,
    Crashed,
    StageError,
    Unsupported,
    died_by,
    exit_text,
    plain,
    stage,
)
from fpdiff.core.paths import write_whole
from fpdiff.core.precision import Precision
from fpdiff.core.support import NATIVE, OTHER_DTYPE, Support

DEMOTE_F64 = "--iree-input-demote-f64-to-f32"
# sm_80 compiles and runs on H100/H200 with iree-base-compiler 3.13; sm_90 fails with "missing GPU target".
CUDA_TARGET = "sm_80"
_MLIR_TYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64"}
_FLOAT_OP = re.compile(r"=\s*(?:arith\.(?:addf|subf|mulf|divf|remf|negf|maximumf|minimumf|maxnumf|minnumf)|"
                       r"math\.\w+)\b[^\n]*:\s*(?:vector<[\dx]*x)?(f16|bf16|f32|f64)>?\s*$", re.M)
_ABI_DEMOTED = re.compile(r"tensor<[^>]*xf64>\s+as\s+tensor<[^>]*xf32>")


_INTEGER_DISPATCH = re.compile(r"(?:^|_|x)u?i(?:8|4)(?:x|_|$)")


def tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(found).exists():
        raise Unsupported(f"{name} not found (install iree-base-compiler)")
    return found


# the flag a quantized cell hands ONNX Runtime's quantizer (the graph IREE compiles), never the compiler
EXCLUDE = "nodes_to_exclude="


def excluded(task: Task) -> tuple[str, ...]:
    """The nodes the user's flags have onnxruntime's quantizer leave float in the QDQ graph IREE compiles; one line
    in a cell that is not quantized."""
    from fpdiff.backends.base import quantizer_nodes
    mine = [f for f in task.flags if f.startswith(EXCLUDE)]
    return quantizer_nodes(mine, "iree", ("nodes_to_exclude",), task.precision)["nodes_to_exclude"]


def compile_flags(device: str, precision: Precision, user_flags: tuple[str, ...]) -> list[str]:
    """Target flags, plus fp64 kept as fp64 unless the user's own flags say otherwise (IREE demotes by default);
    a quantized cell's nodes_to_exclude is its quantizer's, not the compiler's."""
    user_flags = tuple(f for f in user_flags if not f.startswith(EXCLUDE))
    if device.startswith("cuda"):
        flags = ["--iree-hal-target-device=cuda", f"--iree-cuda-target={CUDA_TARGET}"]
    else:
        flags = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                 "--iree-llvmcpu-target-cpu=host"]
    if precision.is_float64 and not any(f.startswith(DEMOTE_F64) for f in user_flags):
        flags.append(f"{DEMOTE_F64}=false")
    return flags + list(user_flags)


def computed_dtypes(phase_dir: Path) -> tuple[Counter, bool]:
    """Float arithmetic ops in the dispatches by element type, and whether the public signature was demoted."""
    counts: Counter = Counter()
    for f in phase_dir.glob("*.executable-sources.mlir"):
        counts.update(_MLIR_TYPES[t] for t in _FLOAT_OP.findall(f.read_text()))
    demoted = any(_ABI_DEMOTED.search(f.read_text()) for f in phase_dir.glob("*.abi.mlir"))
    return counts, demoted


def _lowered_whole() -> set:
    """Ops IREE 3.13 lowers as they are, whose decomposition in torch's table it cannot lower: roll opens into an
    integer aten.fmod (refused: Swin's shifted windows) and squeeze.dim/squeeze into aten.squeeze.dims (refused:
    DeBERTa-v2's attention), while aten.roll and aten.squeeze.dim/default compile (tests/backends/test_iree.py)."""
    import torch
    aten = torch.ops.aten
    return {aten.roll.default, aten.squeeze.dim, aten.squeeze.default}


def decompositions() -> dict:
    """What the program is decomposed with before import: torch.export's default table (core ATen, composite ops
    opened) turns ops IREE 3.13 cannot lower into ones it can (transformers' masks use aten.diff and a bool new_ones
    that becomes an i1 literal iree-compile cannot legalize), plus batch norm in inference form, which is core ATen
    but not lowered by IREE (ResNet). Also makes in-place ops functional."""
    import torch
    from torch._decomp import get_decompositions
    aten = torch.ops.aten
    table = torch.export.default_decompositions()
    whole = _lowered_whole()
    for op in list(table):
        # scaled_dot_product_attention stays whole: IREE lowers it to its own attention op, and torch's
        # decomposition gives its output other strides than eager, so a later view fails to retrace (a small
        # GPT-2; torch.onnx fails the same way on T5 and Swin, bench/upstream/torch_onnx_sdpa_view.py)
        if "scaled_dot_product" in str(op) or op in whole:
            del table[op]
    table.update(get_decompositions([aten._native_batch_norm_legit_no_training, aten._native_batch_norm_legit,
                                     aten._native_batch_norm_legit_functional, aten.native_batch_norm]))
    return table


def import_program(program: Any, precision: Precision, mlir: Path,
                   table: dict[Any, Any] | None = None) -> dict[str, str]:
    """torch program -> torch-dialect MLIR: decomposed to what IREE lowers (`table`, default decompositions()), then
    IREE's FX importer (frozen: weights inline); iree-turbine's importer (weights as globals) when the frozen import
    fails. Returns the route taken."""
    with stage(TORCH_EXPORT, "torch.export (run_decompositions)"):
        # a new program: the graph is ours to edit below
        program = program.run_decompositions(decompositions() if table is None else table)
    try:
        with stage(IMPORT, "iree FX importer"):
            _import_frozen(program, precision, mlir)
        return {"iree_import": "fx-frozen"}
    except StageError as e:
        frozen_failure = str(e)
    try:
        with stage(IMPORT, "iree-turbine"):
            from iree.turbine import aot
            mlir.write_text(str(aot.export(program).mlir_module))
    except (StageError, ImportError) as e:
        raise StageError(IMPORT, "iree FX importer", f"frozen FX import: {frozen_failure}; iree-turbine import "
                         f"(the fallback): {e}") from e
    return {"iree_import": "iree-turbine", "iree_import_why": f"the frozen FX import failed: {frozen_failure}"}


def user_ops(program: Any) -> set[str]:
    """The ops of the program as exported (before fpdiff's decomposition), spelled as iree-compile names them
    without the dialect prefix: aten.squeeze.dim, aten.roll (a `.default` overload is unnamed there)."""
    return {str(n.target).removesuffix(".default") for n in program.graph.nodes if n.op == "call_function"}


def _place(built: Path, final: Path) -> None:
    """A folder this run built, moved into place in one rename; where another run placed the same build first, theirs
    stays (a reader never sees a folder half written or half removed)."""
    if not built.exists():
        return
    try:
        os.replace(built, final)
    except OSError:
        shutil.rmtree(built, ignore_errors=True)


def _import_onnx(graph: Path, mlir: Path) -> None:
    """iree-import-onnx on an ONNX file; its failure is one line (import_failure)."""
    r = subprocess.run([tool("iree-import-onnx"), str(graph), "-o", str(mlir)], capture_output=True, text=True)
    if r.returncode:
        raise import_failure(r.stderr)


def import_failure(stderr: str) -> StageError:
    """iree-import-onnx's failure in one line: its exception's own message, where the traceback's last line is only
    the tail of a printed proto ("name: \"z\""), with an ONNX data type number named."""
    lines = plain(stderr).strip().splitlines() or ["?"]
    at = next((i for i in range(len(lines) - 1, -1, -1) if re.match(r"[\w.]*(Error|Exception): ", lines[i])), None)
    said = " ".join(x.strip() for x in lines[at:]) if at is not None else lines[-1]
    said = re.sub(r"^[\w.]*\.(\w+Error): ", r"\1: ", said)
    said = re.sub(r"data_type: (\d+)", lambda m: f"data_type: {m.group(1)} ({_onnx_type(int(m.group(1)))})", said)
    return StageError(IMPORT, "iree-import-onnx", f"iree-import-onnx failed: {said}"[:MESSAGE_CHARS])


def _onnx_type(code: int) -> str:
    import onnx
    try:
        return onnx.TensorProto.DataType.Name(code)
    except ValueError:
        return "an unknown type"


def _declared(a: Any, out: Any) -> Any:
    """An output as the graph declares it: IREE's runtime hands uint8 back as int8 (findings/ops-004), the same
    bits; a value of another width is left as it is."""
    import numpy as np
    from onnx.helper import tensor_dtype_to_np_dtype
    try:
        want = np.dtype(tensor_dtype_to_np_dtype(out.type.tensor_type.elem_type))
    except (KeyError, ValueError, TypeError):
        return a
    if a.dtype != want and a.dtype.kind in "iu" and want.kind in "iu" and a.dtype.itemsize == want.itemsize:
        return a.view(want)
    return a


def _typed_outputs(model: Any) -> Any:
    """The graph with each output that was marked without a shape given its inferred type: iree-import-onnx checks
    the model, and the checker refuses an output without one."""
    import onnx
    inferred = onnx.shape_inference.infer_shapes(model).graph
    known = {v.name: v for v in [*inferred.value_info, *inferred.output] if v.type.tensor_type.HasField("shape")}
    for out in model.graph.output:
        if not out.type.tensor_type.HasField("shape") and out.name in known:
            out.CopyFrom(known[out.name])
    return model


def _run_compile(mlir: Path, flags: list[str], out: Path, phases: Path | None) -> subprocess.CompletedProcess:
    """iree-compile; on failure its stderr also holds the IR of the failed pass (large constants elided), from which
    compile_failure names the op left unlowered."""
    dump = [f"--dump-compilation-phases-to={phases}"] if phases else []
    return subprocess.run([tool("iree-compile"), str(mlir), *flags, "-o", str(out), *dump, *DIAGNOSE],
                          capture_output=True, text=True)


def compile_program(program: Any, precision: Precision, flags: list[str], mlir: Path, out: Path,
                    phases: Path | None = None) -> dict:
    """A torch program compiled into `out` through fpdiff's decomposition; when iree-compile refuses an op that the
    decomposition made (not in the program as exported), or rejects the imported IR before any pass (an ill-typed
    decomposition: torch's reflection pad under a dynamic dim), again from the program as exported, so a failure is
    only ever of the user's ops. Returns the route taken; raises the refusal or failure otherwise."""
    flags = ["--iree-input-type=torch", *flags]
    route = import_program(program, precision, mlir)
    r = _run_compile(mlir, flags, out, phases)
    if not r.returncode:
        return route
    failure = compile_failure(r.stderr, r.returncode, precision.name, _importer(route))
    if not isinstance(failure, Unsupported):
        if getattr(failure, "stage", None) != IMPORT:
            raise failure  # a compile failure after passes is IREE's
        made = f"iree-compile failed on the IR of fpdiff's decomposition: {str(failure)[:300]}"
        route, again = _compile_as_exported(program, precision, flags, mlir, out, phases)
        if again is None:
            return {**route, "iree_decomposition": "none", "iree_decomposition_why": made}
        raise again  # the program as exported fails too: IREE's failure on the user's own ops
    mine = user_ops(program)
    if _op_name(failure.op) in mine:
        raise failure
    made = f"fpdiff's decomposition for IREE made {failure.op}, which iree-compile cannot lower"
    route, again = _compile_as_exported(program, precision, flags, mlir, out, phases)
    if again is None:
        return {**route, "iree_decomposition": "none", "iree_decomposition_why": made}
    if isinstance(again, Unsupported) and again.op == failure.op:
        raise again  # the same op refused without fpdiff's decomposition: IREE's own lowering of the user's op
    if isinstance(again, Unsupported) and _op_name(again.op) in mine:
        raise Unsupported(f"{again}; (with fpdiff's decomposition: {made})", op=again.op, dtype=again.dtype,
                          stage=again.stage, component=again.component)
    raise StageError(COMPILE, "fpdiff's decomposition for iree", f"{made}; without the decomposition: {again}")


def _compile_as_exported(program: Any, precision: Precision, flags: list[str], mlir: Path, out: Path,
                         phases: Path | None) -> tuple[dict, Exception | None]:
    """The program imported as exported (no decomposition) and compiled: its route, and its failure or None."""
    route = import_program(program, precision, mlir, table={})
    if phases:
        shutil.rmtree(phases, ignore_errors=True)
    r = _run_compile(mlir, flags, out, phases)
    return route, (compile_failure(r.stderr, r.returncode, precision.name, _importer(route)) if r.returncode
                   else None)


def _importer(route: dict[str, str]) -> str:
    """The component that wrote the IR iree-compile read, by import_program's route."""
    return "iree-turbine" if route.get("iree_import") == "iree-turbine" else "iree FX importer"


def _op_name(op: str | None) -> str:
    """An op as iree-compile names it (torch.aten.squeeze.dims) as user_ops spells it (aten.squeeze.dims)."""
    return (op or "").removeprefix("torch.")


def _import_frozen(program: Any, precision: Precision, mlir: Path) -> None:
    from iree.compiler.extras.fx_importer import FxImporter
    with _inline_weights(precision.is_bf16 or precision.is_float64):  # amp-bf16 too: its graph stores bf16 weights
        imp = FxImporter()
        imp.import_frozen_program(_FrozenView(_state_out_of_lists(program)), func_name="main")
        mlir.write_text(str(imp.module))


class _FrozenView:
    """The program as the frozen importer reads it, with non-persistent buffers (BERT's position_ids, rotary
    inv_freq) in its state_dict: torch.export keeps them in `constants`, where iree 3.13's import_frozen_program
    does not look ("Could not find state mapping for buffer"; bench/upstream/iree_fx_nonpersistent_buffer.py)."""

    def __init__(self, program: Any) -> None:
        self._program = program
        self.state_dict = {**program.state_dict, **{name: program.constants[name] for name in
                                                    program.graph_signature.non_persistent_buffers}}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._program, name)


def _state_out_of_lists(program: Any) -> Any:
    """A weight or buffer used inside a list argument (Swin indexes its bias table with a buffer: aten.index.Tensor
    takes a list) passed through aten.clone first: the frozen importer turns that state into a literal, and a list
    mixing literals and values fails ("Heterogeneous lists are not supported"; bench/upstream/
    iree_fx_frozen_index_buffer.py). A clone changes no value. Edits the program's graph in place."""
    import torch
    sig = program.graph_signature
    state = set(sig.inputs_to_buffers) | set(sig.inputs_to_parameters) | set(sig.inputs_to_lifted_tensor_constants)
    graph = program.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    clones: dict = {}

    def through_clone(x: Any) -> Any:
        if getattr(x, "op", None) != "placeholder" or x.name not in state:
            return x
        if x.name not in clones:
            with graph.inserting_after(placeholders[-1]):
                clones[x.name] = graph.call_function(torch.ops.aten.clone.default, (x,))
            clones[x.name].meta.update({k: x.meta[k] for k in ("val", "tensor_meta") if k in x.meta})
        return clones[x.name]

    for node in list(graph.nodes):
        if node.op == "call_function":
            node.args = tuple(type(a)(through_clone(x) for x in a) if isinstance(a, (list, tuple)) else a
                              for a in node.args)
    return program


@contextlib.contextmanager
def _inline_weights(on: bool) -> Iterator[None]:
    """Weights as dense<> literals instead of dense_resource<>: iree-compile 3.13 rejects bf16 and f64 weights in
    the resource form ("'arith.constant' op failed to verify that all of {value, result} have same type").
    Only the encoding of the same values changes."""
    if not on:
        yield
        return
    import iree.compiler.extras.fx_importer as fxi
    from iree.compiler.ir import DenseElementsAttr

    class _Dense:
        @staticmethod
        def get_from_buffer(arr: Any, name: str, tensor_type: Any) -> Any:
            return DenseElementsAttr.get(arr, type=tensor_type.element_type, shape=list(tensor_type.shape))

    saved = fxi.DenseResourceElementsAttr
    fxi.DenseResourceElementsAttr = _Dense
    try:
        yield
    finally:
        fxi.DenseResourceElementsAttr = saved


# How iree-compile says it cannot: an op it has no lowering for (named; a torch op arrives as torch.operator with
# its name inside), or a math function with no implementation for the dtype at link time (llvm-cpu f64 tanh/erf).
_CANNOT_LOWER = re.compile(r"failed to legalize operation '([\w.]+)'(?:[^\n]*?<\{name = \"([\w.]+)\")?")
# Torch values, not operations: when torch-mlir leaves an op unconverted, the type conversion that follows fails
# on its constant operand (`torch.constant.int` for an integer aten.fmod, `torch.constant.float` for
# upsample_bilinear2d's scales) and names that. The op itself is the torch op left in the failed pass's IR: an ATen
# op, or a torchvision one (ONNX RoiAlign becomes torch.torchvision.roi_align, which has no lowering).
_OPERAND = ("torch.constant.", "torch.prim.", "torch_c.")
_LEFT_OP = re.compile(r"\btorch\.(?:aten|torchvision|prims)\.\w+(?:\.\w+)?")
# A failed pass prints its IR under this header (--mlir-print-ir-after-failure); an error on the input file with no
# such header (and no legalization, which only a conversion pass does) is the parser or verifier rejecting the IR as
# given, before any pass ran.
_PASS_FAILED = re.compile(r"// -----// IR Dump After .* Failed")
_ON_INPUT = re.compile(r"^\S+\.mlir:\d+:\d+: error: ", re.M)
# Printing options for a failed compile (stderr only): the failed pass's IR, with large constants elided.
DIAGNOSE = ["--mlir-print-ir-after-failure", "--mlir-elide-elementsattrs-if-larger=16",
            "--mlir-elide-resource-strings-if-larger=64"]
_NO_SYMBOL = re.compile(r"undefined symbol: (\w+)")
# Ops of IREE's own pipeline dialects: one of these left unlegalized is the compiler breaking on itself (the opset-9
# alexnet's fp16 weights left a util.initializer behind), never a refusal of something the model asked for.
_INTERNAL = ("util.", "flow.", "stream.", "hal.", "vm.", "iree_", "builtin.")
# How it says it broke: an assertion, an LLVM fatal error, a crash report. These are compiler bugs, never refusals.
_CRASH = re.compile(r"Assertion .* failed|LLVM ERROR|PLEASE submit a bug report|Stack dump|Segmentation fault")


def compile_failure(stderr: str, returncode: int, precision: str, importer: str = "the importer") -> Exception:
    """A failed iree-compile by the module docstring's rule: a refusal (Unsupported, op named) when it says it cannot
    lower an op, `importer`'s failure at import when it rejects the IR as given, else the compiler's failure at
    compile (a crash, a verifier error on its own passes' IR, anything it did not declare)."""
    text = plain(stderr)
    errors = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()]
    first = (errors or text.strip().splitlines()[-3:] or ["(no output)"])[0][:MESSAGE_CHARS]
    if returncode >= 0 and not _CRASH.search(text):
        refused = _refusal(text, first, precision)
        if refused is not None:
            return refused
        if _ON_INPUT.search(text) and not _PASS_FAILED.search(text) and "failed to legalize" not in text:
            return StageError(IMPORT, importer, f"iree-compile rejects the IR {importer} wrote, before any pass: "
                              f"{first}")
    signal_number = died_by(returncode)
    if signal_number is not None:
        said = "" if first == "(no output)" else f": {first}"
        return Crashed(COMPILE, "iree-compile", f"iree-compile was {exit_text(-signal_number)} (exit code "
                       f"{returncode}){said}")
    return StageError(COMPILE, "iree-compile", f"iree-compile failed: {first}")


def _refusal(text: str, first: str, precision: str) -> Exception | None:
    """What iree-compile declared it cannot do: no lowering for an op (Unsupported naming it), no math function for
    the dtype; a legalization failure on a value that names no op left is its failure (StageError); None when it
    declared nothing."""
    m = _CANNOT_LOWER.search(text)
    op = (m.group(2) or m.group(1)) if m else None
    if op and op.startswith(_OPERAND):
        left = _LEFT_OP.findall(text)
        if not left:
            return StageError(COMPILE, "iree-compile", f"iree-compile failed on {op}, a value, naming no op that "
                              f"uses it: {first}")
        first = f"{left[0]} left unlowered ({len(left)} torch ops left in all); it reported {first}"
        op = left[0]
    if op and not op.startswith(_INTERNAL):
        return Unsupported(f"iree-compile cannot lower {op}: {first}", op=op, dtype=precision, stage=COMPILE,
                           component="iree-compile")
    m = _NO_SYMBOL.search(text)
    if m:
        return Unsupported(f"iree-compile has no {m.group(1)} for {precision}: {first}", op=m.group(1),
                           dtype=precision, stage=COMPILE, component="iree-compile")
    return None


# Support in iree-compile's own words: it names each dispatch after its root op, its shape and its element types
# ("softmax_2x3x4x4xf32_generic"; "batch_matmul_8x16x16x16_f16xf16xf32": f16 operands, an f32 result). A dispatch
# computes in the widest type of its operands (a name listing three or more types ends with its result, which holds an
# accumulator and is no operand): "conv_2x3x3x3x2x2_bf16xf32xf32" (a bf16 AveragePool as a conv with an f32 window)
# multiplies in f32, while the f16 matmul's products are f16 operands' (exact in its f32 accumulator).
_DISPATCH = re.compile(r"hal\.executable\.export public @\S*?_dispatch_\d+_(\w+)")
_NAMED_TYPE = re.compile(r"(?:^|[x_])(bf16|f16|f32|f64)(?=[x_]|$)")
_WIDTH = ["bf16", "f16", "f32", "f64"]  # narrow to wide (bf16 before f16: fewer mantissa bits)
SUPPORT_DISPATCHES = 64  # dispatches named in the record: a one-op case has a few; a whole model must not flood it


def dispatch_types(phase_dir: Path) -> dict[str, str]:
    """Each dispatch of the compiled module (its name less the function prefix) -> the float type it computes in,
    as its name says; dispatches whose name gives no float type (attention, copies) are left out."""
    named: dict[str, str] = {}
    for f in sorted(phase_dir.glob("*.executable-sources.mlir")):
        for name in _DISPATCH.findall(f.read_text()):
            types = _NAMED_TYPE.findall(name)
            operands = types[:-1] if len(types) >= 3 else types
            if operands:
                named[name] = _MLIR_TYPES[max(operands, key=_WIDTH.index)]
    return named


def dispatch_support(phase_dir: Path, want: str, counts: Counter, planned: dict | None, device: str) -> Support:
    """The compiled graph as a whole (dispatches are not the source's ops): the types its dispatches compute in,
    and the state that makes against the dtype asked, by core/dtypes.py's share rule (an f32 statistic beside f16
    arithmetic is normal; IREE computing a bf16 softmax in f32 is not what was asked); the dispatches' float ops
    (`counts`) stand in when no dispatch name gives a type."""
    from importlib.metadata import version

    from fpdiff.core.dtypes import too_wide
    named = dispatch_types(phase_dir)
    by_type = Counter(named.values()) or counts
    target = "cuda" if device.startswith("cuda") else "llvm-cpu"
    runtime = f"iree-compile {version('iree-base-compiler')} {target}"
    if not sum(by_type.values()):
        return Support(runtime)  # nothing computed in a float type it names: no word on the precision
    wide = too_wide(by_type, want, planned)
    shown = dict(list(named.items())[:SUPPORT_DISPATCHES])
    what = ", ".join(f"{n} {t}" for t, n in sorted(by_type.items()))
    source = "dispatches" if named else "float ops in its dispatches"
    graph = {"asked": want, "dispatches": shown, "state": OTHER_DTYPE if wide else NATIVE,
             "said": f"iree-compile made {sum(by_type.values())} {source} computing in {what}, asked "
             f"{want}" + (f": {', '.join(list(shown)[:4])}" if wide and shown else "")}
    cut = len(named) - SUPPORT_DISPATCHES
    return Support(runtime, graph=graph, not_recorded={"dispatches": cut} if cut > 0 else {})


def _compile_repro(r: Repro, args: list[str]) -> str:
    """A repro of a compile that fails: iree-compile on the imported module with the cell's arguments; a compiler
    that dies by a signal makes the script die by the same one."""
    r.meta["compile_args"] = args
    r.meta["compile_command"] = " ".join(["iree-compile", "segment.mlir", *args, "-o", "segment.vmfb"])
    return _COMPILE_REPRO


_COMPILE_REPRO = """import os
import subprocess
from iree.compiler.tools.binaries import find_tool
done = subprocess.run([find_tool("iree-compile"), str(here / "segment.mlir"), *meta["compile_args"], "-o",
                       os.devnull], capture_output=True, text=True)
if done.returncode < 0:  # the compiler died by a signal: this run dies by the same one
    os.kill(os.getpid(), -done.returncode)
if done.returncode:
    said = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in said if "error" in ln.lower()] or said[:1]
    raise RuntimeError(f"iree-compile exited {done.returncode}: {errors[0] if errors else ''}")
outs = []
"""


class IreeBackend(Backend):
    name = "iree"
    kinds = frozenset({TORCH, ONNX})
    independent = True  # its own ONNX importer and code generation
    takes_flags = True
    requires = ("iree.compiler", "iree.runtime")
    extra = "iree"

    def prepare_task(self, task: Task) -> Prepared:
        excluded(task)  # refused here in one line
        flags = compile_flags(task.device, task.precision, task.flags)
        made: dict = {}
        # "import-v3" in the key: modules compiled before roll and squeeze were kept whole have no decomposition record
        vmfb, hit = task.cache.get_or_build(*task.key("iree", "import-v3", *flags), suffix=".vmfb",
                                            build=lambda out: made.update(self._compile(task, flags, out)))
        route, phases = vmfb.with_suffix(".import.json"), vmfb.with_suffix(".phases")
        if made:  # this process built it: its records move into place whole (another run may be reading them)
            _place(Path(made.pop("phases_built")), phases)
            write_whole(route, json.dumps(made))
        counts, demoted = computed_dtypes(phases)
        info: dict[str, Any] = {"cache": "hit" if hit else "miss", "flags": flags}
        info.update(json.loads(route.read_text()) if route.exists() else {})
        want = task.requested_dtype
        planned = None
        if task.precision.autocast is not None or task.is_program:  # wider ops on purpose: count what it asked for
            planned = dict(Counter(_MLIR_TYPES[t] for f in phases.glob("*.input.mlir")
                                   for t in _FLOAT_OP.findall(f.read_text())))
        # a demoted signature takes and returns f32: the outputs then say what ran, not the dispatches' count
        computed = None if demoted else mixed_dtype(counts, want)
        if demoted:
            info["signature"] = "demoted from f64 to f32"
        remedy = (f"compile with {DEMOTE_F64}=false" if want == "float64"
                  else "check the compile flags for demotion/promotion options")
        return Prepared(self._runner(vmfb, task.device), computed, info=info, op_dtypes=dict(counts),
                        planned_op_dtypes=planned, dtype_remedy=remedy,
                        support=dispatch_support(phases, want, counts, planned, task.device))

    def _compile(self, task: Task, flags: list[str], out: Path) -> dict[str, Any]:
        """Import and compile into `out`; returns how the model was imported (and exported, for ONNX graphs)."""
        with tempfile.TemporaryDirectory(prefix="fpdiff-iree-") as tmp:
            mlir = Path(tmp) / "model.mlir"
            # the phases go beside this build's own temporary file; prepare_task moves them into place with it
            phases = out.with_name(out.name + ".phases")
            shutil.rmtree(phases, ignore_errors=True)
            try:
                made = self._import_and_compile(task, flags, mlir, out, phases)
            except BaseException:
                shutil.rmtree(phases, ignore_errors=True)
                raise
        return {**made, "phases_built": str(phases)}

    def _import_and_compile(self, task: Task, flags: list[str], mlir: Path, out: Path, phases: Path) -> dict[str, Any]:
        if task.is_torch:
            with stage(TORCH_EXPORT, "torch.export"):
                program = task.program()
            return compile_program(program, task.precision, flags, mlir, out, phases)
        _import_onnx(task.onnx_file(), mlir)  # the importer only translates; refusing an op is iree-compile's
        r = _run_compile(mlir, flags, out, phases)
        if r.returncode:
            raise compile_failure(r.stderr, r.returncode, task.precision.name, "iree-import-onnx")
        return {"iree_import": "iree-import-onnx"}

    def prepare_quantized(self, task: Task) -> Prepared:
        """The QDQ graph (the cell's model quantized by onnxruntime.quantization, or the user's own file) imported by
        iree-import-onnx and compiled at the fp32 flags: IREE lowers QuantizeLinear/DequantizeLinear into its own
        integer and float dispatches; what they computed in is read from its dispatch phases."""
        from fpdiff.core import precision as prec
        from fpdiff.onnxtools.quantize import QUANTIZE, float_graph, qdq_graph
        from fpdiff.onnxtools.quantize import tool as quantizing_tool
        given = Path(task.given) if task.given else None
        graph = given or qdq_graph(task, excluded(task))
        flags = compile_flags(task.device, prec.FP32, task.flags)
        with tempfile.TemporaryDirectory(prefix="fpdiff-iree-q-") as tmp:
            mlir, out, phases = Path(tmp) / "model.mlir", Path(tmp) / "model.vmfb", Path(tmp) / "phases"
            _import_onnx(graph, mlir)
            done = _run_compile(mlir, flags, out, phases)
            if done.returncode:
                raise compile_failure(done.stderr, done.returncode, task.precision.name, "iree-import-onnx")
            def build(dest: Path) -> None:
                shutil.copy(out, dest)
            vmfb = task.cache.get_or_build(*task.key("iree-quantized", str(graph), *flags), suffix=".vmfb",
                                           build=build)[0]
            names = [n for f in sorted(phases.glob("*.executable-sources.mlir"))
                     for n in _DISPATCH.findall(f.read_text())]
        made = f"the file itself ({given.name})" if given else \
            quantizing_tool(task.precision.name, graph, excluded(task))
        integer = [n for n in names if _INTEGER_DISPATCH.search(n)]  # a dispatch that reads int8 or int4 operands
        record = {"graph": str(graph), "tool": made, "component": f"the file {graph.name}" if given else QUANTIZE,
                  "integer_ops": {"integer dispatches": len(integer)} if integer else {},
                  "float_ops": len(names) - len(integer), **float_graph(task)}
        values: dict[str, Any] = {}
        run = reading_back(self._runner(vmfb, task.device), graph, record, values,
                           lambda model, inputs: self._run_marked(model, inputs, task.device, flags))
        return Prepared(run, info={"quantized_by": made, "flags": flags}, quantized=record, read_back=values)

    def _run_marked(self, model: Any, inputs: tuple, device: str, flags: list[str]) -> list[Any]:
        """The graph with its activation quantizers marked as outputs, imported and compiled at the cell's flags and
        run on `inputs`: every output as numpy (e4m3 as the bit patterns IREE hands back)."""
        import numpy as np
        import onnx
        with tempfile.TemporaryDirectory(prefix="fpdiff-iree-marked-") as tmp:
            path, mlir, vmfb = Path(tmp) / "marked.onnx", Path(tmp) / "marked.mlir", Path(tmp) / "marked.vmfb"
            onnx.save(_typed_outputs(model), str(path))
            _import_onnx(path, mlir)
            if _run_compile(mlir, flags, vmfb, None).returncode:
                raise StageError(COMPILE, "iree-compile", "the marked graph did not compile")
            with stage(LOAD, "iree.runtime"):
                outs = self._runner(vmfb, device)(*inputs)
                outs = [np.asarray(o.to_host() if hasattr(o, "to_host") else o) for o in outs]
        return [_declared(o, v) for o, v in zip(outs, model.graph.output)]

    def repro(self, r: Repro) -> str | None:
        """The segment imported and compiled with the cell's flags; the script needs iree-base-runtime only. When
        the compile itself fails or dies, that is what the script shows: it runs iree-compile on the imported
        module with the cell's flags (iree-base-compiler alone)."""
        flags = compile_flags(r.device, r.precision, r.flags)
        mlir, vmfb = r.out / "segment.mlir", r.out / "segment.vmfb"
        if r.onnx_segment:
            subprocess.run([tool("iree-import-onnx"), str(r.out / "segment.onnx"), "-o", str(mlir)], check=True,
                           capture_output=True)
            input_type = []
            done = _run_compile(mlir, flags, vmfb, None)
            if done.returncode:
                return _compile_repro(r, flags)
        else:
            input_type = ["--iree-input-type=torch"]
            try:
                r.meta.update(compile_program(r.program, r.precision, flags, mlir, vmfb))
            except StageError as e:
                if e.stage != COMPILE or not mlir.exists():
                    raise
                return _compile_repro(r, [*input_type, *flags])
        r.meta["flags"] = flags
        r.meta["compile_command"] = " ".join(["iree-compile", "segment.mlir", *input_type, *flags, "-o",
                                              "segment.vmfb"])
        r.meta["driver"] = "cuda" if r.device.startswith("cuda") else "local-task"
        return "import iree.runtime as rt\n" + NUMPY_INPUTS + """vmfb = str(here / "segment.vmfb")
module = rt.load_vm_flatbuffer_file(vmfb, driver=meta["driver"])
fn = [n for n in module.vm_module.function_names if not n.startswith("__") and not n.endswith("$async")][0]
outs = module[fn](*[as_np(x, d) for x, d in zip(xs, meta["input_dtypes"])])
outs = [o.to_host() for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
"""

    @staticmethod
    def _runner(vmfb: Path, device: str) -> Callable[..., list[Any]]:
        import iree.runtime as rt
        with stage(LOAD, "iree.runtime"):
            config = rt.Config("cuda" if device.startswith("cuda") else "local-task")
            module = rt.VmModule.mmap(config.vm_instance, str(vmfb))
            ctx = rt.SystemContext(config=config)
            ctx.add_vm_module(module)
        names = [n for n in ("main", "main_graph") if module.lookup_function(n) is not None] or [
            n for n in module.function_names if not n.startswith("__") and not n.endswith("$async")]
        if not names:
            raise Unsupported("the compiled module exports no function to call")
        fn = ctx.modules.module[names[0]]

        def run(*inputs: Any) -> list[Any]:
            out = fn(*(_to_numpy(t) for t in inputs))
            return list(out) if isinstance(out, (tuple, list)) else [out]
        return run


