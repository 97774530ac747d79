"""A torch program quantized the way PT2E users quantize it (torchao's prepare_pt2e, calibration, convert_pt2e) with a
backend's own quantizer; and the quantized program as the QDQ ONNX graph fpdiff emulates exactly in float64: the
program's own scales and zero points, each of its quantize and dequantize ops one ONNX QuantizeLinear or
DequantizeLinear, the float ops between them as they are."""
from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from fpdiff.core.errors import EMULATE, QUANTIZE, QUANTIZED_NONE, StageError, Unsupported, UsageError, stage

EMULATION_EXPORT = "fpdiff's emulation (torch.onnx of the quantized program)"


def quantize(program: torch.export.ExportedProgram, quantizer: Any, calibration: Sequence[tuple[Any, ...]],
             inputs: tuple[Any, ...], fold: bool = True) -> torch.export.ExportedProgram:
    """`program` prepared with `quantizer`, calibrated on `calibration` (never the judged inputs), converted, and
    exported again at `inputs`: the quantized program a PT2E backend lowers. `fold`: convert_pt2e's fold_quantize
    (stores weights as int8; litert-torch's converter takes them unfolded, as its own tests convert). A failure here
    is the quantizer's (its annotation and transforms run inside prepare_pt2e), named by the quantizer's class; a
    program it left wholly float is unsupported (the format is not on this model), before any lowering."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    with stage(QUANTIZE, f"{type(quantizer).__name__} (PT2E prepare_pt2e, convert_pt2e)"), torch.no_grad():
        prepared = prepare_pt2e(program.module(), quantizer)
        for sample in calibration:
            prepared(*sample)
        converted = convert_pt2e(prepared, fold_quantize=fold)
        if not any("quantize" in str(n.target) for n in converted.graph.nodes if n.op == "call_function"):
            # said before the backend lowers a float program as if quantized (a converter error that is not the
            # format's: litert-torch's PT2EQuantizer annotates no conv_transpose2d, findings/ops-025)
            raise Unsupported(f"{type(quantizer).__name__} (PT2E) {QUANTIZED_NONE}: the program it made holds no "
                              "quantize op")
        return torch.export.export(converted, tuple(inputs))


def qdq_graph(program: torch.export.ExportedProgram, out: Path, rows: Sequence[int] | None = None) -> None:
    """The quantized program written as the QDQ ONNX graph fpdiff emulates (its optimizer off: nothing folded, each
    quantize and dequantize op kept). `rows`: for each dynamic quantizer in graph order (dynamic_inputs), how many
    trailing dims one run-time range covers, where the backend computes ranges per row rather than per tensor as the
    program declares (XNNPACK); None: per tensor. torch.onnx failing here is fpdiff's emulation failing."""
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    left = list(rows or [])
    with stage(EMULATE, EMULATION_EXPORT), contextlib.redirect_stdout(io.StringIO()):
        exported = torch.onnx.export(program, (), dynamo=True, optimize=False, verbose=False,
                                     custom_translation_table=_translations(left))
        if rows and left:
            raise RuntimeError(f"{len(left)} of the program's {len(rows)} dynamic quantizers were not translated")
        exported.save(str(out))
    _record_modules(program, out)


def marked_module(program: torch.export.ExportedProgram) -> tuple[torch.fx.GraphModule, dict]:
    """The quantized program as a module whose outputs, after the program's own (flat), are each static activation
    quantizer's dequantized value, the model inputs' left out (a backend fed integers does not run them): what a
    backend runs to read its quantizers back (the quantize's integers themselves do not pass every converter). The
    record names each in output order, with its scale, zero point, dtype and shape in the program."""
    qd = torch.ops.quantized_decomposed
    gm = program.module()
    record: dict = {"marked": []}
    extra = []
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target != qd.quantize_per_tensor.default or \
                getattr(n.args[0], "op", None) != "call_function":
            continue  # a weight's quantizer (a parameter), an input's, or a run-time one (dynamic)
        dq = next((u for u in n.users if u.target == qd.dequantize_per_tensor.default), None)
        if dq is not None:
            extra.append(dq)
            record["marked"].append({"name": n.name, "scale": float(n.args[1]), "zero_point": int(n.args[2]),
                                     "dtype": str(n.args[5]).removeprefix("torch."),
                                     "shape": [int(d) for d in n.args[0].meta["val"].shape]})
    output = next(n for n in gm.graph.nodes if n.op == "output")
    outs = output.args[0]
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    output.args = ((*outs, *extra),)
    record["outputs"] = len(outs)
    gm.graph._codegen = torch.fx.graph.CodeGen()  # flat outputs: the program's output tree no longer holds them
    gm.recompile()
    return gm, record


def marked_values(m: Any, n_outs: int, record: dict, extra: Sequence[Any], given: dict[str, Any] | None = None,
                  layout: Any = None) -> list[Any]:
    """What read_back's run_marked returns after the cell's outputs: for each quantizer `m` (the emulation's graph
    with its quantizers marked, emulate.marked_quantizers) has as an output after the cell's `n_outs`, the
    backend's integers, from `extra` (the marked module's outputs after its own, marked_module's record order; a
    float one is the dequantized value, whose integers it holds exactly) or `given` (a value fpdiff fed, by ONNX
    name). `layout(value, shape)`: the value in the program's layout, None where that cannot be told. A quantizer
    with no value is the read-back failing (the cell is then judged from its outputs alone)."""
    import numpy as np
    names = [o.name for o in m.graph.output][n_outs:]
    fx = {n.input[0]: n.output[0] for n in m.graph.node if n.op_type == "Clip"}  # QuantizeLinear -> the FX node's name
    by_name = {}
    for entry, v in zip(record["marked"], extra):
        v = np.asarray(v.detach().numpy() if hasattr(v, "detach") else v)
        if v.dtype.kind == "f":
            v = np.rint(v.astype(np.float64) / np.float64(np.float32(entry["scale"]))) + entry["zero_point"]
        v = v.astype(entry.get("dtype", "int8"))
        taken = layout(v, entry["shape"]) if layout is not None else (v if list(v.shape) == entry["shape"] else None)
        if taken is not None:
            by_name[entry["name"]] = taken
    given = given or {}
    missing = [fx.get(n, n) for n in names if n not in given and fx.get(n, n) not in by_name]
    if missing:
        raise StageError(EMULATE, "fpdiff's read-back", f"the marked program holds no value of "
                         f"{', '.join(missing[:3])} in a layout fpdiff can tell")
    return [given[n] if n in given else by_name[fx.get(n, n)] for n in names]


def dynamic_inputs(program: torch.export.ExportedProgram) -> list[list[str]]:
    """For each dynamic quantizer (choose_qparams) in graph order, the ops its quantized value reaches through
    quantize, dequantize and data movement: what a backend reads to decide how it computes the range."""
    found: list[list[str]] = []
    for n in program.graph.nodes:
        if n.op == "call_function" and "choose_qparams" in str(n.target):
            reached, todo = [], list(n.users)
            while todo:
                user = todo.pop()
                name = str(user.target)
                if "quantize" in name or "getitem" in name or "view" in name or "permute" in name:
                    todo.extend(user.users)
                else:
                    reached.append(name)
            found.append(reached)
    return found


def _translations(rows: list[int]) -> dict[Any, Any]:
    """ONNX for the PT2E ops as the decomposed ops compute them, where torch.onnx has none or another: choose_qparams
    (a dynamic quantizer's run-time range, over the trailing dims `rows` gives, one per
    quantizer in graph order, consumed as torch.onnx translates them), quantize and dequantize with a
    scale and zero point computed at run time (torch.onnx takes them as numbers only), and per-tensor quantize clamped
    to quant_min and quant_max (torch.onnx saturates to the type's whole range, which a narrowed range such as
    [-127, 127] is not)."""
    from onnxscript import opset18 as op
    from onnxscript.function_libs.torch_lib.ops import common

    def const(v: float, like: Any) -> Any:
        return op.CastLike(op.Constant(value_float=float(v)), like)

    def quantize(x: Any, scale: float, zero_point: int, quant_min: int, quant_max: int, dtype: int) -> Any:
        q = op.QuantizeLinear(x, const(scale, x), common.constant(zero_point, dtype=dtype))
        return op.Clip(q, common.constant(quant_min, dtype=dtype), common.constant(quant_max, dtype=dtype))

    def quantize_at_run_time(x: Any, scale: Any, zero_point: Any, quant_min: int, quant_max: int, dtype: int) -> Any:
        # clamp(round(x / scale) + zero_point, quant_min, quant_max), round half to even, each row its own range
        q = op.Add(op.Round(op.Div(x, op.CastLike(scale, x))), op.CastLike(zero_point, x))
        return op.Cast(op.Clip(q, const(quant_min, x), const(quant_max, x)), to=dtype)

    def dequantize_at_run_time(x: Any, scale: Any, zero_point: Any, quant_min: int, quant_max: int, dtype: int,
                               out_dtype: int = -1) -> Any:
        wide = op.Cast(x, to=1 if out_dtype in (-1, None) else out_dtype)
        return op.Mul(op.Sub(wide, op.CastLike(zero_point, wide)), op.CastLike(scale, wide))

    def choose_qparams(x: Any, quant_min: int, quant_max: int, eps: float, dtype: Any) -> tuple[Any, Any]:
        # quantized_decomposed.choose_qparams.tensor: the range widened to hold 0, scale = range / levels (at least
        # eps), zero point = quant_min - round(min / scale), clamped into the type's range
        dims = rows.pop(0) if rows else 0
        rank = len(x.shape) if getattr(x, "shape", None) is not None else 0
        axes = {"axes": op.Constant(value_ints=list(range(rank - dims, rank))), "keepdims": 1} if dims and rank \
            else {"keepdims": 0}
        low = op.Min(op.ReduceMin(x, **axes), const(0.0, x))
        high = op.Max(op.ReduceMax(x, **axes), const(0.0, x))
        scale = op.Max(op.Div(op.Sub(high, low), const(quant_max - quant_min, x)), const(eps, x))
        zp = op.Clip(op.Sub(const(quant_min, x), op.Round(op.Div(low, scale))), const(quant_min, x),
                     const(quant_max, x))
        return op.Cast(scale, to=1), op.Cast(zp, to=7)  # float32 scale, int64 zero point, as torch returns them

    qd = torch.ops.quantized_decomposed
    return {qd.choose_qparams.tensor: choose_qparams, qd.quantize_per_tensor.default: quantize,
            qd.quantize_per_tensor.tensor: quantize_at_run_time,
            qd.dequantize_per_tensor.tensor: dequantize_at_run_time}


# the graph's metadata key under which qdq_graph records the module each program node came from ({fx node: path})
MODULES_KEY = "fpdiff.pt2e_modules"


def module_paths(program: Any) -> dict[str, str]:
    """Each program node's innermost module (its nn_module_stack's last path, the name a PT2E quantizer's module
    filter takes); nodes of the root module, and the quantizer's own, are left out."""
    out = {}
    for n in program.graph.nodes:
        stack = n.meta.get("nn_module_stack") or {}
        path = next(reversed(stack.values()))[0] if stack else ""
        if path:
            out[n.name] = path
    return out


def _record_modules(program: Any, out: Path) -> None:
    """The QDQ graph's record of which module each program node came from (module_paths), in its metadata."""
    import json

    import onnx
    m = onnx.load(str(out), load_external_data=False)
    onnx.helper.set_model_props(m, {**{p.key: p.value for p in m.metadata_props},
                                    MODULES_KEY: json.dumps(module_paths(program))})
    onnx.save(m, str(out))


FLOAT_MODULES = "float_modules="


def known_modules(program: Any, modules: Sequence[str], backend: str) -> None:
    """A module filter's names checked against the program's modules: an unknown one is one line (the quantizer
    would match nothing without a word)."""
    if not modules:
        return
    paths = set(module_paths(program).values())
    unknown = [m for m in modules if m not in paths and not any(p.startswith(m + ".") for p in paths)]
    if unknown:
        raise UsageError(f"--backend-flag {backend}={FLOAT_MODULES}... names {len(unknown)} module"
                         f"{'s' * (len(unknown) != 1)} the program has no op in: {', '.join(unknown[:3])}")
