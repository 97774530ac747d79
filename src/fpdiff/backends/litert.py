"""LiteRT (TFLite): litert-torch converts the cell's fp32 torch program to a .tflite and LiteRT's CompiledModel runs it
on the CPU through XNNPACK, as a phone does. fp16 has two meanings there, kept apart and named: XNNPACK's force-fp16
(`fp16=xnnpack`, the default: the file stays float32 and XNNPACK computes every op it takes in float16) and the
converter's fp16 (`fp16=weights`: float16 weights widened to float32 arithmetic), chosen with
`--backend-flag litert=fp16=weights`. The converter pins typing-extensions below what fpdiff's other packages need, so
it runs in its own interpreter (`make litert-env`); the runtime alone runs a user's own .tflite anywhere."""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.backends.base import TORCH, Artifact, Backend, Prepared, Repro, Task, TensorSpec, reading_back
from fpdiff.backends.torch_ops import refused_op
from fpdiff.core import precision as prec
from fpdiff.core.compare import Finding
from fpdiff.core.dtypes import mixed_dtype, too_wide
from fpdiff.core.errors import (
    COMPILE,
    LOAD,
    MESSAGE_CHARS,
    QUANTIZE,
    RUN,
    TORCH_EXPORT,
    StageError,
    Unsupported,
    UsageError,
    stage,
)
from fpdiff.core.paths import write_whole
from fpdiff.core.precision import Precision

# The one line said wherever the converter is missing (the main environment: it cannot install there)
NEEDS_ENV = ("the LiteRT converter (litert-torch) needs its own interpreter: `make litert-env`, then "
             "--backend-python litert=.venv-litert/bin/python")
XNNPACK, WEIGHTS = "xnnpack", "weights"  # the two meanings of fp16 (--backend-flag litert=fp16=MEANING)
MEANINGS = (XNNPACK, WEIGHTS)
# TFLITE_XNNPACK_DELEGATE_FLAG_FORCE_FP16 (tensorflow/lite/delegates/xnnpack/xnnpack_delegate.h): XNNPACK rewrites its
# whole subgraph to float16 or refuses to prepare it
FORCE_FP16 = 0x4
FP16_REMEDY = "XNNPACK's force-fp16 computes in float16: --backend-flag litert=fp16=xnnpack (fpdiff's default)"
# TFLite ops that only move, view or name values: left out when counting what computes in which dtype. DEQUANTIZE
# widens a float16 weight to float32 exactly; it rounds nothing.
MOVES = {"RESHAPE", "TRANSPOSE", "SQUEEZE", "EXPAND_DIMS", "BROADCAST_TO", "CONCATENATION", "GATHER", "GATHER_ND",
         "SLICE", "STRIDED_SLICE", "SPLIT", "SPLIT_V", "PACK", "UNPACK", "TILE", "PAD", "PADV2", "MIRROR_PAD", "CAST",
         "DEQUANTIZE", "QUANTIZE", "SHAPE", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "REVERSE_V2", "SELECT", "SELECT_V2",
         "ZEROS_LIKE", "ONES_LIKE", "FILL", "RANGE", "SCATTER_ND", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND",
         "DYNAMIC_UPDATE_SLICE", "DELEGATE"}
# How XNNPACK says, on stderr, that it would not take a node (under force-fp16: an op it will not run in float16)
_REFUSED = re.compile(r"failed to delegate (\w+) node #(\d+)")


def fp16_meaning(flags: Sequence[str]) -> str | None:
    """What the user's flags say fp16 means: `fp16=xnnpack` or `fp16=weights`, the last one given; None: not said
    (fpdiff's own conversion then takes XNNPACK's force-fp16, a user's file runs as it is)."""
    unknown = [f for f in flags if not f.startswith(("fp16=", *(f"{o}=" for o in SCOPE_FLAGS)))]
    given = [f.removeprefix("fp16=") for f in flags if f.startswith("fp16=")]
    bad = [g for g in given if g not in MEANINGS]
    if unknown or bad:
        raise UsageError(f"litert takes --backend-flag litert=fp16={'|'.join(MEANINGS)} (or, in a quantized cell, "
                         f"{' or '.join(f'litert={o}=OP,OP' for o in SCOPE_FLAGS)}); got "
                         f"{', '.join(unknown + [f'fp16={b}' for b in bad])}")
    return given[-1] if given else None


def _converter() -> Any:
    """litert_torch, or the one line that says where it runs."""
    try:
        import litert_torch
    except ImportError:
        raise Unsupported(NEEDS_ENV) from None
    return litert_torch


def _check_precision(p: Precision) -> None:
    """fp32 and fp16 exist in LiteRT on a CPU; the others are refused with the reason."""
    if p.cast_dtype in ("float32", "float16"):
        return
    if p.autocast is not None:
        why = ("LiteRT has no autocast, and no bfloat16 arithmetic on a CPU" if p.is_bf16 else
               "LiteRT has no autocast; its fp16 is a whole-model mode (run --precisions fp16)")
    elif p.is_bf16:
        why = ("LiteRT has no bfloat16 arithmetic on a CPU: its converter casts bfloat16 inputs to float32 and "
               "XNNPACK has no bfloat16 inference option (fp16 exists: fp16=xnnpack, fp16=weights)")
    elif p.is_float64:
        why = "LiteRT computes in float32 at most: litert-torch narrows float64 to float32 and XNNPACK has no float64"
    else:
        why = f"LiteRT computes in fp32 or fp16; {p.name} does not exist there"
    raise Unsupported(why, dtype=p.name)


def widened(program: Any, inputs: Sequence[Any]) -> tuple[Any, tuple[Any, ...]]:
    """What the converter takes: the program as a module and its sample inputs, float weights and inputs widened
    to float32. Exact: a float16 value is a float32 one, and force-fp16 rounds the arithmetic back to float16; the
    converter itself cannot legalize float16 ops ("failed to legalize operation 'tfl.pad'")."""
    import torch
    module = program.module()
    state = [*program.state_dict.values(), *program.constants.values()]
    if any(isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float32 for t in state):
        module = module.float()
    return module, tuple(t.float() if t.is_floating_point() else t for t in inputs)


def convert(module: Any, inputs: tuple[Any, ...], weights16: bool, out: Path) -> dict[str, Any]:
    """The module as a .tflite at `out` (the converter's fp16 weights when `weights16`); -> how it went."""
    litert_torch = _converter()
    config = None
    if weights16:
        from litert_torch.generative.quantize import quant_recipes
        config = quant_recipes.full_fp16_recipe()
    t0 = time.perf_counter()
    with stage(COMPILE, "litert_torch.convert"):
        try:
            model = litert_torch.convert(module, inputs, quant_config=config)
        except Exception as e:
            op = refused_op(str(e))
            if op is None:
                raise
            raise Unsupported(f"litert-torch has no lowering for {op}", op=op) from e
        model.export(str(out))
    return {"litert_torch": litert_torch.__version__, "convert_s": round(time.perf_counter() - t0, 3)}


RECIPE_JSON = ".recipe.json"  # beside a recipe's .tflite: the recipe itself, as ai-edge-quantizer writes it
# ai-edge-quantizer recipe scopes a dynamic-range or weight-only cell takes from the user's flags, each a list of ops
# by their output tensor's name (the scope its recipes match): left float (its no_quantize algorithm), or, in an
# int4-weight cell, quantized with 8-bit weights
SCOPE_FLAGS = ("no_quantize", "nodes_at_8_bits")


def recipe_scopes(task: Task) -> dict[str, tuple[str, ...]]:
    """The recipe scopes the user's flags give a quantized cell ({flag: op output names}); one line where the cell
    takes none."""
    from fpdiff.backends.base import quantizer_nodes
    scopes = quantizer_nodes([f for f in task.flags if not f.startswith("fp16=")], "litert", SCOPE_FLAGS,
                             task.precision)
    scheme = task.precision.name
    if any(scopes.values()) and scheme not in RECIPES:
        raise UsageError(f"--backend-flag litert={next(k for k, v in scopes.items() if v)}=... scopes "
                         f"ai-edge-quantizer's recipe; LiteRT's {scheme} cell is litert-torch's PT2EQuantizer")
    if scopes["nodes_at_8_bits"] and scheme != "int4-weight":
        raise UsageError(f"--backend-flag litert=nodes_at_8_bits=... sets 8-bit weights in an int4-weight cell; this "
                         f"cell is {scheme}")
    return scopes


@contextlib.contextmanager
def _native_log(lines: list[str]) -> Iterator[None]:
    """Collect what LiteRT's C++ side prints on stderr while inside (XNNPACK names the nodes it refuses only there),
    then pass it on, so the cell's log still has it."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
            lines.extend(text.splitlines())
            sys.stderr.write(text)


def _native(at: str, what: str, force: bool, fn: Callable[[], Any], lines: list[str]) -> Any:
    """fn() with LiteRT's own words kept in `lines` (what it printed before too: XNNPACK refuses a node when the
    model is created and fails only when its tensors are allocated). A force-fp16 run that fails after XNNPACK
    refused a node is the refusal it is (that op not in float16 there); any other failure is charged to `what` at
    stage `at`, with the lines LiteRT printed (its exception says only "Failed to allocate tensors")."""
    seen = len(lines)
    try:
        with _native_log(lines):
            return fn()
    except Exception as e:
        refused = sorted({op for op, _ in _REFUSED.findall("\n".join(lines))})
        said = "; ".join(ln.strip() for ln in lines[seen:] if "ERROR" in ln)[:MESSAGE_CHARS]
        if force and refused:
            raise Unsupported(f"XNNPACK's force-fp16 would not take {', '.join(refused)} in float16 here, and then "
                              f"could not prepare the model ({said})", op=refused[0], dtype="fp16", stage=at,
                              component="XNNPACK force-fp16") from e
        text = " ".join(str(e).split())[:MESSAGE_CHARS]
        raise StageError(at, what, f"{type(e).__name__}: {text}" + (f" ({said})" if said else "")) from e


def refused_nodes(lines: Sequence[str]) -> set[int]:
    """The nodes XNNPACK said it would not take (under force-fp16 they run on LiteRT's builtin kernels)."""
    return {int(n) for _, n in _REFUSED.findall("\n".join(lines))}


@dataclass
class FileView:
    """A .tflite as LiteRT's Interpreter reads it, without running it: the signature fpdiff runs, its inputs and
    outputs in the model's own order (named as the signature names them), the ops and the tensors."""
    signature: str | None
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    input_index: list[int]  # tensor index of each input, in order
    ops: list[dict[str, Any]]
    tensors: list[dict[str, Any]]
    signatures: int


def _dtype(t: Any) -> str:
    """numpy's name of a dtype the Interpreter gives as a type (numpy.float32 -> "float32")."""
    return np.dtype(t).name


def _specs(details: list[dict[str, Any]], names: dict[int, str]) -> list[TensorSpec]:
    """Tensor details as TensorSpecs: named by the signature where it names them, dynamic dims (-1) as None."""
    return [TensorSpec(names.get(d["index"], d["name"]),
                       tuple(None if int(n) < 0 else int(n) for n in d.get("shape_signature", d["shape"])),
                       _dtype(d["dtype"])) for d in details]


def read_file(path: Path) -> FileView:
    """The file's declaration, read by the Interpreter with no delegate applied (nothing is run or allocated)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=str(path),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    sigs = it._get_full_signature_list()
    key = next(iter(sigs), None)
    ins, outs = it.get_input_details(), it.get_output_details()
    names: dict[int, str] = {}
    if key is not None:  # the signature's names, in the subgraph's order (the signature's map need not be in it)
        names = {int(i): n for part in ("inputs", "outputs") for n, i in sigs[key][part].items()}
    return FileView(key, _specs(ins, names), _specs(outs, names), [int(d["index"]) for d in ins],
                    it._get_ops_details(), it.get_tensor_details(), len(sigs))


def delegated(path: Path, shapes: Sequence[Sequence[int]] | None) -> tuple[set[int], list[dict[str, Any]]]:
    """The ops XNNPACK takes by default (LiteRT applies it unless told not to), at these input shapes, and every op.
    The Interpreter lists each XNNPACK partition as a DELEGATE node beside the ops it replaced: a partition is what
    lies between its inputs and outputs."""
    from ai_edge_litert.interpreter import Interpreter
    lines: list[str] = []
    with _native_log(lines):
        it = Interpreter(model_path=str(path))
        for d, shape in zip(it.get_input_details(), shapes or ()):
            if list(d["shape"]) != list(shape):
                it.resize_tensor_input(d["index"], list(shape))
        it.allocate_tensors()
        ops = it._get_ops_details()
    producer = {int(t): o["index"] for o in ops if o["op_name"] != "DELEGATE" for t in o["outputs"]}
    taken: set[int] = set()
    for part in (o for o in ops if o["op_name"] == "DELEGATE"):
        edge = {int(t) for t in part["inputs"]}
        todo = [int(t) for t in part["outputs"]]
        while todo:
            t = todo.pop()
            n = producer.get(t)
            if t in edge or n is None or n in taken:
                continue
            taken.add(n)
            todo.extend(int(i) for i in ops[n]["inputs"] if i >= 0)
    return taken, [o for o in ops if o["op_name"] != "DELEGATE"]


def count_op_dtypes(ops: list[dict[str, Any]], taken: set[int], force: bool) -> Counter[str]:
    """Float arithmetic ops by the dtype each computed in: its result's, except that under force-fp16 an op XNNPACK
    took computed in float16 whatever the file's tensors say."""
    counts: Counter[str] = Counter()
    for o in ops:
        floats = [_dtype(t) for t in o["result_types"] if np.dtype(t).kind == "f"]
        if o["op_name"] in MOVES or not floats:
            continue
        counts["float16" if force and o["index"] in taken else floats[0]] += 1
    return counts


def file_precision(view: FileView) -> tuple[Precision, str]:
    """The precision a file computes in as fpdiff names it, and how that was read: float16 inputs mean float16
    arithmetic; float16 weights with float32 inputs are the converter's fp16 (DEQUANTIZE widens them)."""
    produced = {int(t) for o in view.ops for t in o["outputs"]}
    weights = Counter(_dtype(t["dtype"]) for t in view.tensors if t["index"] not in produced
                      and t["index"] not in view.input_index and np.dtype(t["dtype"]).kind == "f")
    floats = sorted({s.dtype for s in view.inputs if "float" in s.dtype})
    if floats == ["float16"]:
        return prec.FP16, "its float inputs are float16: float16 arithmetic"
    if weights.get("float16"):
        dequantized = sum(o["op_name"] == "DEQUANTIZE" for o in view.ops)
        return prec.FP16, (f"{weights['float16']} float16 weights dequantized to float32 arithmetic ({dequantized} "
                        "DEQUANTIZE ops): the converter's fp16, not float16 arithmetic")
    said = ", ".join(f"{n} {k}" for k, n in sorted(weights.items())) or "no float"
    return prec.FP32, f"float inputs {', '.join(floats) or 'none'}, weights {said}: float32 arithmetic"


class _Runner:
    """A .tflite loaded by LiteRT's CompiledModel on the CPU (XNNPACK, force-fp16 or not), fed numpy arrays in the
    file's input order; returns numpy arrays in its output order."""

    def __init__(self, path: Path, view: FileView, force: bool) -> None:
        from ai_edge_litert.compiled_model import CompiledModel
        from ai_edge_litert.options import CpuOptions, Options
        self.force = force
        self.said: list[str] = []  # what LiteRT printed on stderr loading and running it
        options = Options(cpu_options=CpuOptions(num_threads=1, xnnpack_flags=FORCE_FP16 if force else None))
        self.model = _native(LOAD, "LiteRT CompiledModel", force,
                             lambda: CompiledModel.from_file(str(path), options=options), self.said)
        signatures = self.model.get_signature_list()
        self.key = view.signature if view.signature in signatures else next(iter(signatures))
        sig = signatures[self.key]
        self.index = self.model.get_signature_index(self.key)
        self.ins = _matched([s.name for s in view.inputs], list(sig["inputs"]))
        self.outs = _matched([s.name for s in view.outputs], list(sig["outputs"]))

    def fully_accelerated(self) -> bool:
        return bool(self.model.is_fully_accelerated())

    def __call__(self, arrays: Sequence[np.ndarray], fill: int | None = None) -> list[np.ndarray]:
        """The outputs for `arrays`; `fill`: each output buffer holds that value before the run (what a delegate
        never writes keeps it)."""
        return list(_native(RUN, "LiteRT", self.force, lambda: self._run(arrays, fill), self.said))

    def _run(self, arrays: Sequence[np.ndarray], fill: int | None = None) -> list[np.ndarray]:
        m, key = self.model, self.key
        declared = m.get_input_tensor_details(key)
        for name, a in zip(self.ins, arrays):  # a file with dynamic dims runs at the inputs' own shapes
            if list(declared[name]["shape"]) != list(a.shape):
                m.resize_input_tensor(self.ins.index(name), list(a.shape), self.index)
        feeds = {}
        for name, a in zip(self.ins, arrays):
            feeds[name] = m.create_input_buffer_by_name(key, name)
            feeds[name].write(np.ascontiguousarray(a.astype(declared[name]["dtype"], copy=False)))
        results = {name: m.create_output_buffer_by_name(key, name) for name in self.outs}
        if fill is not None:
            before = m.get_output_tensor_details(key)
            for n in self.outs:
                results[n].write(np.full(before[n]["shape"], fill, before[n]["dtype"]))
        m.run_by_name(key, feeds, results)
        shown = m.get_output_tensor_details(key)
        out = [results[n].read(int(np.prod(shown[n]["shape"])), shown[n]["dtype"]).reshape(shown[n]["shape"])
               for n in self.outs]
        for b in [*feeds.values(), *results.values()]:
            b.destroy()
        return out

    def close(self) -> None:
        self.model.close()


def _matched(file_names: list[str], model_names: list[str]) -> list[str]:
    """The CompiledModel's names in the file's order: the same names (a signature), else by position."""
    return file_names if sorted(file_names) == sorted(model_names) else model_names


def _numpy(t: Any) -> np.ndarray:
    """A torch tensor or an array as numpy (the worker feeds tensors; intermediates() takes either)."""
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


def _prepared(path: Path, force: bool, want: str, notes: list[Finding], info: dict[str, Any],
              remedy: str | None, record: bool = True) -> Prepared:
    """The .tflite loaded and run by LiteRT, with what ran where and in which dtype as the cell's record. Which
    ops XNNPACK took is read at the file's declared shapes when they are static, else at the first run's.
    `record` False: the caller reads what ran itself (a quantized cell counts integer ops, not float dtypes)."""
    view = read_file(path)
    runner = _Runner(path, view, force)
    info.update({"ai_edge_litert": _version("ai-edge-litert"), "tflite": str(path), "tflite_bytes": path.stat().st_size,
                 "xnnpack_force_fp16": force, "fully_delegated_to_xnnpack": runner.fully_accelerated()})
    if view.signatures > 1:
        info["signature"] = f"{view.signature} (the first of {view.signatures})"
    prepared = Prepared(lambda *xs: runner([_numpy(x) for x in xs]), notes=notes, info=info, dtype_remedy=remedy,
                        release=runner.close, artifact=path)
    if not record:
        return prepared
    static = all(None not in s.shape for s in view.inputs)
    if static:
        _record(prepared, path, None, force, want, refused_nodes(runner.said))
        return prepared

    def first_run(*xs: Any) -> list[np.ndarray]:
        arrays = [_numpy(x) for x in xs]
        out = runner(arrays)
        if prepared.op_dtypes is None and "xnnpack_ops" not in prepared.info:
            try:
                _record(prepared, path, [a.shape for a in arrays], force, want, refused_nodes(runner.said))
            except Exception as e:  # the record of a run that worked: its failure must not fail the cell
                prepared.info["xnnpack_ops"] = f"not read ({type(e).__name__}: {' '.join(str(e).split())[:200]})"
        return out
    prepared.run = first_run
    return prepared


def _record(prepared: Prepared, path: Path, shapes: Sequence[Sequence[int]] | None, force: bool, want: str,
            refused: set[int]) -> None:
    """Fill in which ops XNNPACK took (by default, less those it refused to take in float16) and the dtype each
    op computed in."""
    taken, ops = delegated(path, shapes)
    taken -= refused if force else set()
    counts = count_op_dtypes(ops, taken, force)
    _placement(prepared.info, taken, ops)
    if force:
        prepared.info["computed_by"] = (f"XNNPACK's force-fp16 computed {counts.get('float16', 0)} float ops in "
                                        "float16; the file's tensors still say float32")
    prepared.op_dtypes = dict(counts) or None
    if counts:
        prepared.computed_dtype = want if not too_wide(counts, want) else mixed_dtype(counts, want)


def _placement(info: dict[str, Any], taken: set[int], ops: list[dict[str, Any]]) -> None:
    """How many ops XNNPACK took, and which ran on LiteRT's own kernels (float32 even under force-fp16)."""
    info["xnnpack_ops"] = f"{len(taken)} of {len(ops)}"
    left = Counter(o["op_name"] for o in ops if o["index"] not in taken)
    if left:
        info["builtin_kernel_ops"] = dict(left)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def intermediates(path: Path | str, inputs: Sequence[Any]) -> dict[str, np.ndarray]:
    """Every named tensor an op of the file computes, by name (litert-torch names them after the torch module path),
    for inputs in the file's input order. Run by LiteRT's builtin kernels with every tensor kept
    (experimental_preserve_all_tensors): a delegate keeps its intermediates to itself, so these are float32 values
    of the reference kernels, not XNNPACK's."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=str(path), experimental_preserve_all_tensors=True,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    details = it.get_input_details()
    if len(details) != len(inputs):
        raise UsageError(f"{Path(path).name} takes {len(details)} inputs; got {len(inputs)}")
    arrays = [_numpy(x) for x in inputs]
    for d, a in zip(details, arrays):
        if list(d["shape"]) != list(a.shape):
            it.resize_tensor_input(d["index"], list(a.shape))
    it.allocate_tensors()
    for d, a in zip(details, arrays):
        it.set_tensor(d["index"], np.ascontiguousarray(a.astype(d["dtype"], copy=False)))
    it.invoke()
    names = {t["index"]: t["name"] for t in it.get_tensor_details()}
    out: dict[str, np.ndarray] = {}
    for o in it._get_ops_details():
        for t in (int(i) for i in o["outputs"]):
            name = names.get(t) or f"tensor{t}"
            out[name if name not in out else f"{name}#{t}"] = np.array(it.get_tensor(t))
    return out


class LiteRtBackend(Backend):
    """LiteRT on the CPU. fp16 is XNNPACK's force-fp16 unless `--backend-flag litert=fp16=weights` asks for the
    converter's fp16 weights; `intermediates(path, inputs)` (this module) gives every tensor of a .tflite by name."""
    name = "litert"
    kinds = frozenset({TORCH})
    shape_variants = False  # converted at the example inputs' shapes
    takes_flags = True
    independent = True  # XNNPACK's and LiteRT's own kernels
    requires = ("ai_edge_litert",)
    extra = "litert"
    artifacts = (".tflite",)


    def reach(self) -> str | None:
        import importlib.util
        if importlib.util.find_spec("litert_torch") is not None:
            return None
        return f"runs .tflite files here (--artifact litert=PATH); converting a torch model: {NEEDS_ENV}"
    def prepare_task(self, task: Task) -> Prepared:
        meaning = fp16_meaning(task.flags) or XNNPACK
        recipe_scopes(task)  # a float cell takes none: one line
        p = task.precision
        _check_precision(p)
        if not task.is_torch:
            raise Unsupported("fpdiff converts torch programs to LiteRT; this model is ONNX (run your own .tflite "
                              "with --artifact litert=PATH)")
        if task.device != "cpu":
            raise Unsupported(f"fpdiff runs LiteRT on the CPU (XNNPACK); {task.device} is not cpu", dtype=p.name)
        _converter()
        weights16 = p.cast_dtype == "float16" and meaning == WEIGHTS
        force = p.cast_dtype == "float16" and meaning == XNNPACK
        made: dict[str, Any] = {}

        path, hit = self._converted(task, weights16, made)
        info: dict[str, Any] = {"litert_torch": _version("litert-torch"), "cache": "hit" if hit else "miss", **made}
        if p.cast_dtype == "float16":
            info["fp16"] = {XNNPACK: "XNNPACK's force-fp16", WEIGHTS: "litert-torch's fp16 weights"}[meaning]
        notes: list[Finding] = []
        remedy = None
        if weights16:
            notes.append(Finding("fp16-weights", "litert-torch's fp16 stores the weights in float16 and widens them "
                                 "to float32 (DEQUANTIZE): every op computes in float32", remedy=FP16_REMEDY))
            remedy = FP16_REMEDY
        elif force:
            remedy = ("the ops XNNPACK does not take (info builtin_kernel_ops) compute in float32 on LiteRT's builtin "
                      "kernels even under force-fp16; no LiteRT option computes them in float16")
        with stage(LOAD, "LiteRT"):
            return _prepared(path, force, task.requested_dtype, notes, info, remedy)

    def _converted(self, task: Task, weights16: bool, made: dict[str, Any]) -> tuple[Path, bool]:
        """The cell's program converted by litert-torch (float32, or float16 weights), cached; -> (path, hit)."""
        owner = task if task.is_program else task.at(prec.FP32)  # fp32 and force-fp16 share one file

        def build(out: Path) -> None:  # the fp32 program: LiteRT's conversion takes the precision
            program = self.export(task, fp32=True)
            with stage(TORCH_EXPORT, "torch.export"):  # the program as a module, widened: still the export's
                module, inputs = widened(program, owner.inputs())
            made.update(convert(module, inputs, weights16, out))
        form = "fp16-weights" if weights16 else "fp32"
        key = owner.key("litert", _version("litert-torch"), form)
        scoped = " ".join(owner.flags)
        if scoped:  # recipe scopes do not change the float conversion: the scoped cells share the pure cell's file,
            # whose op names the scopes were read from
            key = tuple(" ".join(f for f in owner.flags if f.startswith("fp16=")) if k == scoped else k for k in key)
        return task.cache.get_or_build(*key, suffix=".tflite", build=build)

    def prepare_quantized(self, task: Task) -> Prepared:
        """The cell's fp32 program quantized as LiteRT's torch users quantize it (litert-torch's PT2EQuantizer,
        calibrated, converted with its QuantConfig): a full-integer .tflite, int8 in and out, run by LiteRT on the
        CPU. fpdiff quantizes the inputs and dequantizes the outputs with the file's own scales, as an app does.
        The quantized program is emulated from its QDQ ONNX graph; what ran in integers is read from the file's
        tensor types."""
        scheme = task.precision.name
        if scheme not in QUANTIZERS and scheme not in RECIPES:
            raise _no_scheme(scheme)
        recipe_scopes(task)  # refused here in one line where the cell takes none
        if not task.is_torch and not task.given:
            raise Unsupported("fpdiff quantizes torch programs for LiteRT (litert-torch's PT2EQuantizer); this model "
                              "is ONNX", dtype=scheme)
        if task.device != "cpu":
            raise Unsupported(f"fpdiff runs LiteRT on the CPU (XNNPACK); {task.device} is not cpu", dtype=scheme)
        if task.given:
            return self._given(task, Path(task.given))
        _converter()
        if scheme in RECIPES:
            return self._recipe(task, scheme)
        from fpdiff.model import pt2e
        made: dict[str, Any] = {}

        def build(out: Path) -> None:
            fp32 = task.at(prec.FP32)
            quantizer = litert_quantizer(scheme)
            inputs = tuple(fp32.inputs())
            program = pt2e.quantize(self.export(fp32), quantizer, task.calibration(), inputs, fold=False)
            pt2e.qdq_graph(program, task.cache.beside(out, ".qdq.onnx"))
            made.update(convert_quantized(program.module(), inputs, quantizer, out))
            write_marked(program, inputs, quantizer, task.cache.beside(out, MARKED))
        key = task.key("litert-quantized", _version("litert-torch"), scheme, task.calibration_digest())
        path, hit = task.cache.get_or_build(*key, suffix=".tflite", build=build)
        graph = path.with_suffix(".qdq.onnx")
        if not graph.exists() or not path.with_suffix(MARKED_RECORD).exists():  # a companion lost: made again
            build(path)
        tool = quantizing_tool(scheme)
        info: dict[str, Any] = {"quantized_by": tool, "scheme": SCHEMES[scheme], "cache": "hit" if hit else "miss",
                                "run_by": "LiteRT CompiledModel on the CPU (XNNPACK)", **made}
        return quantized_cell(path, {"graph": str(graph), "tool": tool, "component": "litert-torch's PT2EQuantizer"},
                              info, path.with_suffix(MARKED))

    def _recipe(self, task: Task, scheme: str) -> Prepared:
        """The cell's fp32 .tflite quantized by ai-edge-quantizer with its own recipe for the format (LiteRT's
        quantizer for dynamic-range and weight-only files), run by LiteRT; emulated from the file itself
        (model/tflite_qdq.py), each dynamic-range op quantizing its input as the kernel that ran it does."""
        made: dict[str, Any] = {}
        scopes = recipe_scopes(task)
        source, _ = self._converted(task.at(prec.FP32), False, made)
        known_scopes(source, scopes)

        def build(out: Path) -> None:
            made.update(recipe_quantized(source, scheme, out, scopes))
        asked = [x for k, v in scopes.items() if v for x in (k, *v)]
        key = task.key("litert-recipe", _version("litert-torch"), _version("ai-edge-quantizer"), scheme, *asked)
        path, hit = task.cache.get_or_build(*key, suffix=".tflite", build=build)
        if not path.with_suffix(RECIPE_JSON).exists():  # a companion lost: made again
            build(path)
        graph = self._emulation(task, path)
        tool = (f"ai-edge-quantizer {_version('ai-edge-quantizer')} recipe.{RECIPES[scheme]}() on litert-torch "
                f"{_version('litert-torch')}'s float32 .tflite" + _scopes_said(scopes))
        info: dict[str, Any] = {"quantized_by": tool, "scheme": SCHEMES[scheme], "cache": "hit" if hit else "miss",
                                "run_by": "LiteRT CompiledModel on the CPU (XNNPACK)", **made}
        return quantized_cell(path, {"graph": str(graph), "tool": tool, "component": "ai-edge-quantizer",
                                     "float_graph": str(self._emulation(task, source, float_file=True))}, info)

    def _emulation(self, task: Task, path: Path, float_file: bool = False) -> Path:
        """The QDQ graph fpdiff emulates a quantized .tflite by (model/tflite_qdq.py), with the marked copy that
        reads its activation quantizers back beside it; cached by the file's bytes and the LiteRT that placed its
        ops (a dynamic-range op is emulated as the kernel that runs it quantizes). `float_file`: the float .tflite
        a recipe quantized, read the same way (its weights beside the quantized file's, by op), no marked copy."""
        import hashlib

        from fpdiff.model import tflite_qdq
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:20]

        def build(out: Path) -> None:
            names = tflite_qdq.write(path, out, delegated(path, None)[0])
            if not float_file:
                write_marked_file(path, names, task.cache.beside(out, MARKED))
        key = task.key("litert-tflite-qdq", tflite_qdq.READER, _version("ai-edge-litert"), digest)
        graph, _ = task.cache.get_or_build(*key, suffix=".qdq.onnx", build=build)
        if not float_file and not graph.with_suffix(MARKED_RECORD).exists():  # a companion lost: made again
            build(graph)
        return graph

    def _given(self, task: Task, path: Path) -> Prepared:
        """The user's own quantized .tflite, run as it is: its emulation read from the file itself (its scales, zero
        points and ops, model/tflite_qdq.py), and its activations read back from a copy that also outputs them."""
        graph = self._emulation(task, path)
        info: dict[str, Any] = {"quantized_by": f"the file itself ({path.name})",
                                "scheme": "read from the file: each tensor's scale and zero point (per channel, or "
                                          "per block, where it has them), its ops as TFLite computes them, a "
                                          "dynamic-range op's input quantized at run time as its kernel does",
                                "run_by": "LiteRT CompiledModel on the CPU (XNNPACK)"}
        return quantized_cell(path, {"graph": str(graph), "tool": f"the file itself ({path.name})",
                                     "component": "the quantized file"}, info, graph.with_suffix(MARKED))

    def read_artifact(self, path: Path) -> Artifact:
        """What a .tflite declares: its signature's inputs and outputs in the model's order, and its precision."""
        view = read_file(path)
        precision, why = file_precision(view)
        return Artifact(str(path), view.inputs, view.outputs, precision, why)

    def prepare_artifact(self, task: Task, path: Path) -> Prepared:
        """The user's .tflite run as it is; XNNPACK's force-fp16 only when the flag asks for it on an fp16 cell
        (what a file computes in is its own unless the user says how they run it)."""
        force = task.precision.cast_dtype == "float16" and fp16_meaning(task.flags) == XNNPACK
        if task.device != "cpu":
            raise Unsupported(f"fpdiff runs LiteRT on the CPU (XNNPACK); {task.device} is not cpu")
        view = read_file(path)
        precision, why = file_precision(view)
        info: dict[str, Any] = {"file_precision": f"{precision.name}: {why}"}
        notes = []
        remedy = None
        if task.precision.cast_dtype == "float16" and not force:
            remedy = FP16_REMEDY.replace(" (fpdiff's default)", "")
            if precision.is_fp16 and "float32 arithmetic" in why:
                notes.append(Finding("fp16-weights", f"the file holds {why}", remedy=remedy))
        with stage(LOAD, "LiteRT"):
            return _prepared(path, force, task.requested_dtype, notes, info, remedy)

    def repro(self, r: Repro) -> str | None:
        """The segment converted as the cell converted it, as segment.tflite; the script needs ai_edge_litert and
        numpy alone."""
        if r.onnx_segment:
            return None
        import torch
        meaning = fp16_meaning(r.flags) or XNNPACK
        with np.load(r.out / "inputs.npz") as saved:
            xs = [torch.from_numpy(saved[f"in{i}"]) for i in range(len(saved.files))]
        module, inputs = widened(r.program, xs)
        out = r.out / "segment.tflite"
        r.meta.update(convert(module, inputs, r.precision.cast_dtype == "float16" and meaning == WEIGHTS, out))
        view = read_file(out)
        r.meta["litert_inputs"] = [s.name for s in view.inputs]
        r.meta["litert_outputs"] = [s.name for s in view.outputs]
        r.meta["xnnpack_flags"] = FORCE_FP16 if r.precision.cast_dtype == "float16" and meaning == XNNPACK else None
        return _REPRO


_REPRO = '''from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.options import CpuOptions, Options
# xnnpack_flags 4: XNNPACK's force-fp16 (float16 arithmetic); None: as the file says
options = Options(cpu_options=CpuOptions(num_threads=1, xnnpack_flags=meta["xnnpack_flags"]))
model = CompiledModel.from_file(str(here / "segment.tflite"), options=options)
key = next(iter(model.get_signature_list()))
declared = model.get_input_tensor_details(key)
feeds = {}
for name, x in zip(meta["litert_inputs"], xs):
    feeds[name] = model.create_input_buffer_by_name(key, name)
    feeds[name].write(np.ascontiguousarray(x.astype(declared[name]["dtype"])))
results = {name: model.create_output_buffer_by_name(key, name) for name in meta["litert_outputs"]}
model.run_by_name(key, feeds, results)
shown = model.get_output_tensor_details(key)
outs = [results[n].read(int(np.prod(shown[n]["shape"])), shown[n]["dtype"]).reshape(shown[n]["shape"])
        for n in meta["litert_outputs"]]
'''


# The formats LiteRT's torch users make, asked of litert-torch's PT2EQuantizer (get_symmetric_quantization_config):
# int8 weights per channel symmetric in [-127, 127], int8 activations per tensor asymmetric, calibrated by PT2E's
# histogram observers. Its dynamic config leaves activations unquantized in the program (LiteRT's dynamic-range
# kernels quantize them at run time), so dynamic-range and weight-only files come from LiteRT's own quantizer,
# ai-edge-quantizer, on the converted float32 file, with the recipe its documentation names for the format.
QUANTIZERS = {"int8": {"is_per_channel": True}}
# ai-edge-quantizer 0.10.0 takes blocks (BLOCKWISE_32 and up) only for dynamic-range int4; a weight-only recipe asks
# CHANNELWISE or TENSORWISE (its default_policy), and a weight-only BLOCKWISE_32 recipe leaves the file unquantized
# without a word. LiteRT's weight-only int4 is therefore per channel, coarser than the format's blocks of 32.
RECIPES = {"int8-dynamic": "dynamic_wi8_afp32", "int4-weight": "weight_only_wi4_afp32"}
SCHEMES = {
    "int8": "weights int8 per-channel symmetric [-127, 127], activations int8 per-tensor asymmetric, rounding half to "
            "even (requantized by TFLite's fixed-point multipliers), calibration histogram (PT2E HistogramObserver) "
            "on the calibration inputs; the file takes and gives int8: fpdiff quantizes the inputs and dequantizes "
            "the outputs with the file's own scales",
    "int8-dynamic": "weights int8 per-channel symmetric (MinMax), activations float32 in the file, quantized to int8 "
                    "at run time by the kernel that runs each op: XNNPACK asymmetric, one range per row of a fully "
                    "connected layer (and per pixel of a 1x1 conv), per batch item of other convs; LiteRT's builtin "
                    "kernels asymmetric per batch item for convs, symmetric per row for fully connected layers; "
                    "no calibration",
    "int4-weight": "weights int4 per-channel symmetric (MinMax; LiteRT's weight-only int4 has no blocks), widened to "
                   "float32 (DEQUANTIZE) before each op; activations float32; no calibration",
}
_OTHER = {
    "fp8": "TFLite has no float8 tensor type",
}


def _no_scheme(scheme: str) -> Exception:
    """Why a format has no LiteRT cell: fp8 does not exist there (the backend's refusal)."""
    return Unsupported(_OTHER.get(scheme, f"LiteRT quantizes to {', '.join([*QUANTIZERS, *RECIPES])} here"),
                       dtype=scheme)


def recipe_quantized(source: Path, scheme: str, out: Path, scopes: dict[str, tuple[str, ...]] | None = None
                     ) -> dict[str, Any]:
    """A float32 .tflite quantized by ai-edge-quantizer with its recipe for `scheme`, written to `out`, the ops
    `scopes` names left float or at 8 bits by rules added after it (a later rule wins); -> how it went. A failure
    here is the quantizer's."""
    import io

    from ai_edge_quantizer import quantizer, recipe
    t0 = time.perf_counter()
    with stage(QUANTIZE, f"ai-edge-quantizer (recipe.{RECIPES[scheme]})"), \
            contextlib.redirect_stdout(io.StringIO()):  # it prints a summary of sizes
        q = quantizer.Quantizer(str(source))
        q.load_quantization_recipe(getattr(recipe, RECIPES[scheme])())
        for name in (scopes or {}).get("no_quantize", ()):
            q.update_quantization_recipe(regex=scope_regex(name), operation_name="*", algorithm_key="no_quantize")
        for name in (scopes or {}).get("nodes_at_8_bits", ()):
            q.add_weight_only_config(regex=scope_regex(name), operation_name="*", num_bits=8)
        q.quantize().export_model(str(out), overwrite=True)
        # the recipe as ai-edge-quantizer's load_quantization_recipe reads it back: what a plan exports beside the file
        write_whole(out.with_suffix(RECIPE_JSON), json.dumps(q.get_quantization_recipe(), indent=1, default=str))
    return {"ai_edge_quantizer": _version("ai-edge-quantizer"), "quantize_s": round(time.perf_counter() - t0, 3)}


def scope_regex(name: str) -> str:
    """ai-edge-quantizer's scope for one op: its output tensor names joined by ';' with a ';' after the last, so the
    op whose first output is `name` is `^name;`."""
    return "^" + re.escape(name) + ";"


def known_scopes(source: Path, scopes: dict[str, tuple[str, ...]]) -> None:
    """Recipe scopes checked against the ops of the float .tflite: a name no op outputs is one line (a regex that
    matches nothing leaves the recipe as it was, without a word)."""
    asked = [n for names in scopes.values() for n in names]
    if not asked:
        return
    both = sorted(set(scopes.get("no_quantize", ())) & set(scopes.get("nodes_at_8_bits", ())))
    if both:
        raise UsageError(f"no_quantize and nodes_at_8_bits both name {', '.join(both[:3])}: an op is left float or "
                         "quantized at 8 bits, not both")
    view = read_file(source)
    names = {int(t["index"]): t["name"] for t in view.tensors}
    outputs = {names.get(int(op["outputs"][0])) for op in view.ops if len(op["outputs"])}
    unknown = [n for n in asked if n not in outputs]
    if unknown:
        raise UsageError(f"the recipe scopes name {len(unknown)} op{'s' * (len(unknown) != 1)} the float .tflite has "
                         f"no output of: {', '.join(unknown[:3])}")


def _scopes_said(scopes: dict[str, tuple[str, ...]]) -> str:
    """The user's recipe scopes as the cell's "quantized by" says them."""
    said = ""
    for flag, rule in (("no_quantize", "no_quantize"), ("nodes_at_8_bits", "weight-only 8-bit")):
        names = scopes.get(flag, ())
        if names:
            said += (f", then {rule} rules for {len(names)} op{'s' * (len(names) != 1)} ({', '.join(names[:3])}"
                     f"{', ...' if len(names) > 3 else ''})")
    return said


def litert_quantizer(scheme: str) -> Any:
    """litert-torch's PT2EQuantizer set for a format, as its documentation sets it."""
    from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
    return PT2EQuantizer().set_global(get_symmetric_quantization_config(**QUANTIZERS[scheme]))


def quantizing_tool(scheme: str) -> str:
    """What quantized a cell, as its report says it."""
    import importlib.metadata as md
    args = ", ".join(f"{k}=True" for k in QUANTIZERS[scheme])
    return (f"torchao {md.version('torchao')} prepare_pt2e/convert_pt2e(fold_quantize=False) with litert-torch "
            f"{md.version('litert-torch')} PT2EQuantizer(get_symmetric_quantization_config({args})), converted with "
            "QuantConfig(pt2e_quantizer=...)")


def convert_quantized(module: Any, inputs: tuple[Any, ...], quantizer: Any, out: Path) -> dict[str, Any]:
    """The quantized module as a full-integer .tflite at `out`; -> how it went."""
    litert_torch = _converter()
    from litert_torch.quantize.quant_config import QuantConfig
    t0 = time.perf_counter()
    with stage(COMPILE, "litert_torch.convert"):
        model = litert_torch.convert(module, inputs, quant_config=QuantConfig(pt2e_quantizer=quantizer))
        model.export(str(out))
    return {"litert_torch": litert_torch.__version__, "convert_s": round(time.perf_counter() - t0, 3)}


IoQuant = tuple[float, int, str] | None  # an input's or output's scale, zero point and integer dtype in the file


def quantized_cell(path: Path, quantized: dict[str, Any], info: dict[str, Any], marked: Path | None = None) -> Prepared:
    """A full-integer .tflite loaded and run by LiteRT, fed float inputs quantized with the file's own input scales and
    giving its outputs dequantized with its own output scales; what ran in integers counted into `quantized`. Its
    first run also reads each activation quantizer's integers back from `marked` (write_marked), run the same way."""
    with stage(LOAD, "LiteRT"):
        prepared = _prepared(path, False, "float32", [], info, None, record=False)
    taken, ops = delegated(path, None)  # read once: where each op ran, and which ran in integers
    _placement(info, taken, ops)
    prepared.quantized = {**quantized, **integer_placement(read_file(path), ops, taken)}
    ins, outs = io_quantization(path)
    info["io"] = (f"{sum(q is not None for q in ins)} inputs quantized and {sum(q is not None for q in outs)} "
                  "outputs dequantized by fpdiff with the file's own scales and zero points")
    run = prepared.run

    def quantized_run(*xs: Any) -> list[np.ndarray]:
        fed = [quantized_input(_numpy(x), q) for x, q in zip(xs, ins)]
        return [dequantized(o, q) for o, q in zip(run(*fed), outs)]
    prepared.run = quantized_run
    if marked is None or not marked.with_suffix(".json").exists():
        return prepared
    record = marked.with_suffix(".json")
    said = json.loads(record.read_text())
    if said.get("failed"):
        prepared.quantized["read_back"] = False
        prepared.quantized["read_back_failed"] = said["failed"]
        return prepared
    graph = Path(quantized["graph"])
    prepared.run = reading_back(quantized_run, graph, prepared.quantized, prepared.read_back,
                                lambda m, xs: _run_marked(marked, said, m, [_numpy(x) for x in xs], len(outs)))
    return prepared


# The quantized program converted again with every activation quantizer's value also an output, beside the cell's
# file; and what it marked (the quantizers' names, scales and shapes), or why it could not be made
MARKED, MARKED_RECORD = ".marked.tflite", ".marked.json"


def write_marked(program: Any, inputs: tuple[Any, ...], quantizer: Any, out: Path) -> None:
    """The quantized program with each activation quantizer's dequantized value also an output (pt2e.marked_module;
    not the model input's: fpdiff quantizes that itself), converted as the cell's file is, with its record beside. A
    failure is recorded (the cell then is not read back), never raised: the marked file is another program."""
    from fpdiff.model import pt2e
    try:
        gm, record = pt2e.marked_module(program)
        convert_quantized(gm, inputs, quantizer, out)
    except Exception as e:
        record = {"failed": f"{type(e).__name__}: {' '.join(str(e).split())[:MESSAGE_CHARS]}"}
    write_whole(out.with_suffix(".json"), json.dumps(record))


def write_marked_file(path: Path, names: list[str], out: Path) -> None:
    """A .tflite with each of its activation tensors (`names`, as model/tflite_qdq.py names them; not the inputs,
    which fpdiff feeds) also an output of its subgraph and its signature, with the record of what it marked. A
    failure is recorded (the cell then is not read back), never raised: the marked file is another program."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    from fpdiff.model import tflite_qdq
    record: dict[str, Any] = {"marked": [], "layout": "file"}  # its tensors as the emulation holds them: as they are
    try:
        model = schema.ModelT.InitFromPackedBuf(path.read_bytes(), 0)
        sub = model.subgraphs[0]
        inputs = {int(i) for i in sub.inputs}
        outputs = [int(i) for i in sub.outputs]
        record["outputs"] = len(outputs)
        extra = []
        for name in names:
            i = tflite_qdq.index_of(name)
            if i in inputs:
                continue
            t = sub.tensors[i]
            if i not in outputs:
                extra.append(i)
            record["marked"].append({"name": name, "scale": float(t.quantization.scale[0]),
                                     "zero_point": int(t.quantization.zeroPoint[0]),
                                     "dtype": np.dtype(tflite_qdq.dtype_of(t)).name,
                                     "shape": [int(d) for d in t.shape],
                                     # where its value is among the marked file's outputs, as run (not dequantized)
                                     "at": outputs.index(i) if i in outputs else len(outputs) + len(extra) - 1})
        sub.outputs = np.asarray([*outputs, *extra], np.int32)
        if model.signatureDefs:
            sig = model.signatureDefs[0]
            for n, i in enumerate(extra):
                entry = schema.TensorMapT()
                entry.name, entry.tensorIndex = f"fpdiff_marked_{n}".encode(), i
                sig.outputs.append(entry)
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        out.write_bytes(builder.Output())
    except Exception as e:
        record = {"failed": f"{type(e).__name__}: {' '.join(str(e).split())[:MESSAGE_CHARS]}"}
    write_whole(out.with_suffix(".json"), json.dumps(record))


# How a 4-d value the program holds NCHW may come back from the converter (its layout pass keeps convolutions' values
# NHWC, and a value marked as an output keeps that layout): the permutation back to the program's layout
NHWC_TO_NCHW = (0, 3, 1, 2)


def in_program_layout(v: np.ndarray, shape: Sequence[int]) -> np.ndarray | None:
    """A marked value in the program's layout: as it is where its shape is the program's, transposed back where it
    is the program's shape in NHWC; None where that cannot be told (both shapes the same: C, H and W equal) or it is
    neither."""
    shape = tuple(shape)
    nhwc = (shape[0], shape[2], shape[3], shape[1]) if len(shape) == 4 else None
    if v.shape == shape and v.shape != nhwc:
        return v
    if nhwc is not None and v.shape == nhwc and nhwc != shape:
        return v.transpose(NHWC_TO_NCHW)
    return None


# Two values an output buffer holds before a marked run: an output the run never writes keeps them, and differs
UNWRITTEN = (85, 42)


def _run_marked(marked: Path, said: dict[str, Any], m: Any, xs: list[np.ndarray], n_outs: int) -> list[np.ndarray]:
    """The marked file run as the cell runs its own: its first outputs the cell's (dequantized), then the integers of
    each quantizer `m` marks (pt2e.marked_values); the model input's quantizer is what fpdiff fed."""
    from fpdiff.model import pt2e
    ins, outs = io_quantization(marked)
    fed = [quantized_input(x, q) for x, q in zip(xs, ins)]
    with stage(LOAD, "LiteRT (the cell's quantizers marked as outputs)"):
        runner = _Runner(marked, read_file(marked), False)
    try:  # run twice, its outputs filled apart before: what the delegate wrote is the same both times
        got, again = runner(fed, fill=UNWRITTEN[0]), runner(fed, fill=UNWRITTEN[1])
    finally:
        runner.close()
    unwritten = [i for i, (a, b) in enumerate(zip(got, again)) if not np.array_equal(a, b, equal_nan=True)]
    if unwritten:
        raise StageError(RUN, "LiteRT (the cell's quantizers marked as outputs)",
                         f"{len(unwritten)} of the marked file's {len(got)} outputs were never written by its run")
    inputs = [i.name for i in m.graph.input]  # a file input fpdiff quantized: what it fed (no kernel of LiteRT's)
    given = {n.output[0]: fed[inputs.index(n.input[0])] for n in m.graph.node if n.op_type == "QuantizeLinear"
             and n.input[0] in inputs and ins[inputs.index(n.input[0])] is not None}
    finals = [dequantized(o, q) for o, q in zip(got[:n_outs], outs[:n_outs])]
    extra = [got[e["at"]] for e in said["marked"]] if all("at" in e for e in said["marked"]) else \
        got[said["outputs"]:]  # a record of the program's own marking: its values after its outputs, in order
    layout = None if said.get("layout") == "file" else in_program_layout  # the program's marks: the converter's
    return [*finals, *pt2e.marked_values(m, n_outs, said, extra, given, layout)]


def io_quantization(path: Path) -> tuple[list[IoQuant], list[IoQuant]]:
    """Each input's and output's (scale, zero point, dtype) in the file's order where the file holds it in integers
    with one scale; None where it is float (or not quantized)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=str(path),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)

    def one(d: dict[str, Any]) -> IoQuant:
        scale, zero = d["quantization"]
        return (float(scale), int(zero), _dtype(d["dtype"])) if np.dtype(d["dtype"]).kind in "iu" and scale else None
    return [one(d) for d in it.get_input_details()], [one(d) for d in it.get_output_details()]


def quantized_input(x: np.ndarray, q: IoQuant) -> np.ndarray:
    """A float input as the file's integers: round(x / scale) + zero point, half to even, saturated to the type
    (QuantizeLinear's rule, so the emulation's first quantizer sees the same integers)."""
    if q is None or x.dtype.kind != "f":
        return x
    scale, zero, dtype = q
    info = np.iinfo(dtype)
    wide = np.rint(x.astype(np.float64) / np.float64(np.float32(scale))) + zero
    return np.clip(wide, info.min, info.max).astype(dtype)


def dequantized(y: np.ndarray, q: IoQuant) -> np.ndarray:
    """An integer output as float: (q - zero point) * scale (DequantizeLinear's rule), in float32 as that op gives."""
    if q is None:
        return y
    scale, zero, _ = q
    return ((y.astype(np.float64) - zero) * np.float64(np.float32(scale))).astype(np.float32)


def integer_placement(view: FileView, ops: list[dict[str, Any]], taken: set[int]) -> dict[str, Any]:
    """Which compute ops of a quantized .tflite ran in integers and which stayed float, each by where it ran (XNNPACK,
    or LiteRT's builtin kernels): a quantized cell's integer_ops, float_ops and left_float. A full-integer file: an
    op whose input is an integer tensor with quantization parameters. A dynamic-range or weight-only file (no
    activation in integers): a matrix op with integer weights, taken as they are (its kernel quantizes the input at
    run time) or widened before it (weight-only); its other ops are float by the format and not counted."""
    from fpdiff.model.tflite_qdq import WEIGHTED_OPS
    tensors = {int(t["index"]): t for t in view.tensors}

    def scaled(i: int) -> bool:
        t = tensors.get(int(i))
        return t is not None and np.dtype(t["dtype"]).kind in "iu" and bool(len(t["quantization_parameters"]["scales"])
                                                                            or t["quantization"][0])
    made_by = {int(t): o for o in ops for t in o["outputs"]}
    full = any(scaled(o["inputs"][0]) for o in ops if len(o["inputs"]) and o["op_name"] not in MOVES)
    ints: Counter[str] = Counter()
    left: list[str] = []
    for o in ops:
        where = "XNNPACK" if o["index"] in taken else "LiteRT builtin"
        if full and o["op_name"] not in MOVES:
            if scaled(o["inputs"][0]):
                ints[f"{o['op_name']} ({where})"] += 1
            else:
                left.append(f"{o['op_name']} #{o['index']} ({where})")
        elif not full and o["op_name"] in WEIGHTED_OPS:
            w = int(o["inputs"][1]) if len(o["inputs"]) > 1 else -1
            producer = made_by.get(w)
            if scaled(w):
                ints[f"{o['op_name']} ({where}, input quantized at run time)"] += 1
            elif producer is not None and producer["op_name"] == "DEQUANTIZE" and scaled(producer["inputs"][0]):
                ints[f"{o['op_name']} ({where}, integer weights widened to float)"] += 1
            else:
                left.append(f"{o['op_name']} #{o['index']} ({where})")
    return {"integer_ops": dict(ints), "float_ops": len(left), "left_float": left[:32]}

