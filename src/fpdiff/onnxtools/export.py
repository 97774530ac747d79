"""torch -> ONNX, and ONNX -> another float dtype: stages that can change numbers, so they are never trusted."""
from __future__ import annotations

import contextlib
import io
import json
import math
import warnings
from pathlib import Path

import numpy as np
import onnx

from fpdiff.core import compare
from fpdiff.core.errors import MESSAGE_CHARS, ONNX_EXPORT, StageError, plain, raised_by_fpdiff
from fpdiff.onnxtools.dtypes import FLOATS, ONNX_TYPE, np_cast  # noqa: F401 (read from here by other modules)


def _info_file(onnx_path: Path) -> Path:
    return onnx_path.with_name(onnx_path.stem + ".export.json")


def save_export_info(onnx_path: Path, info: dict) -> None:
    """Keep which exporter made `onnx_path` beside it (export_program returns it), for every later cell."""
    _info_file(Path(onnx_path)).write_text(json.dumps(info))


def export_info(onnx_path: Path) -> dict:
    """Which exporter made a cached ONNX export and why (a cell reports it: the exporter is a stage that can change
    numbers). Empty for ONNX sources."""
    f = _info_file(Path(onnx_path))
    return _without_rounding(_departs_said(json.loads(f.read_text())), Path(onnx_path)) if f.exists() else {}


# the fact an export's graph computes another function than its program (the exporter whose graph departed: "dynamo"
# beside a fallback that ran, "torchscript" in a failed export's job info): check's exporter rule decides by it
DEPARTS = "onnx_export_departs"


# the export check's word for a graph it could not evaluate (the reference evaluator refused it): it decided nothing
NOT_RUN = "not run"


def float64_checked(info: dict) -> bool:
    """Whether the float64 export check judged the graph this record is of (it agrees, or departs within fp32's
    tolerance and is the cell's floor): a check that could not run, or a record without one, says nothing of it."""
    said = info.get("onnx_export_check")
    return isinstance(said, str) and not said.startswith(NOT_RUN)


def _departs_said(info: dict) -> dict:
    """A record cached before the departure was a field says it only in its text: read once here, at the edge."""
    if DEPARTS not in info and "departs from the torch program" in (info.get("onnx_exporter_why") or ""):
        return {**info, DEPARTS: "dynamo"}
    return info


def _without_rounding(info: dict, onnx_path: Path) -> dict:
    """A record cached before departures were bounded by float64 rounding (no `onnx_export_explained` beside the
    departure) is bounded now, so a cached 6.5e-17 does not blame the exporter either."""
    d = info.get("onnx_export_departure")
    if d is None or "onnx_export_explained" in info or not onnx_path.exists():
        return info
    explained = rounding_bound(onnx.load(str(onnx_path), load_external_data=False))
    info = {**info, "onnx_export_explained": explained}
    if d <= explained:
        del info["onnx_export_departure"]
        info["onnx_export_check"] = _agrees(d, explained)
    return info


def export_program(program, path: Path, module=None, args: tuple | None = None,
                   input_names: list[str] | None = None, dynamic_axes: dict | None = None) -> dict:
    """torch.onnx's dynamo exporter first, optimizer off: its constant folding deletes `x + 1e-8` (a real number
    change). When it fails, the TorchScript exporter on `module` (an nn.Module, or a callable making one; default:
    the program's own module) with `args` (default: the program's example inputs). A float64 export is also checked:
    the graph, run by the float64 reference evaluator, must compute what the torch program computes on the same
    inputs (`export_departure`); a graph that computes another function is that exporter's failure, like an
    exception, and a smaller departure beyond float64 rounding (float32 constants) is recorded for check. Returns which
    exporter made the file, the check, and, after a fallback, why dynamo failed. Both failing is the exporter's
    failure (StageError), never the failure of the backend that wanted the file."""
    checked: dict = {}
    try:
        _dynamo(program, path)
        why = export_departure(program, path, args, checked)
        if why is None:
            return {"onnx_exporter": "dynamo", **checked}
        dynamo_failure, dynamo_departs = f"its graph departs from the torch program: {why}", True
    except Exception as e:
        if raised_by_fpdiff(e):
            raise
        dynamo_failure, dynamo_departs = _why(e), False
    # each reason cut to half a line, so the report's one line holds both
    half = MESSAGE_CHARS // 2
    try:
        _torchscript(program, path, module, args, input_names, dynamic_axes)
    except Exception as e:
        if raised_by_fpdiff(e):
            raise
        # dynamo's graph computing another function is a fact whatever the fallback does: the exporter rule reads it
        # to charge a cell that ran dynamo's graph (at fp32, where nothing checks it) to torch.onnx, not the backend
        raise StageError(ONNX_EXPORT, "torch.onnx", f"dynamo exporter: {dynamo_failure[:half]}; TorchScript "
                         f"exporter (the fallback): {_why(e)[:half]}",
                         facts={DEPARTS: "dynamo"} if dynamo_departs else {}) from e
    checked = {}
    why = export_departure(program, path, args, checked)
    if why is not None:
        raise StageError(ONNX_EXPORT, "torch.onnx", f"dynamo exporter: {dynamo_failure[:half]}; TorchScript exporter "
                         f"(the fallback): its graph departs from the torch program: {why[:half]}",
                         facts={DEPARTS: "torchscript"})
    return {"onnx_exporter": "torchscript", "onnx_exporter_why": f"the dynamo exporter failed: {dynamo_failure}",
            **({DEPARTS: "dynamo"} if dynamo_departs else {}), **checked}


# The exported graph against the torch program it came from, both in float64 on the same inputs. Two float64
# implementations of the same ops differ by reordered sums (the rounding bound below); the ONNX format
# itself stores float attributes in float32 (a norm's epsilon: tinycnn's graph departs by 2.1e-12 for it), and
# torch.onnx's dynamo exporter stores Python scalars as float32 constants (BERT 1.1e-11, ViT 1.1e-10, GPT-2 5.9e-9):
# such a graph computes the same function with float32-rounded constants. Its departure is recorded
# (`onnx_export_departure`) and check judges the cell against it as a floor, so the backend is not blamed for a
# constant it was handed. A departure beyond fp32's tolerance (1e-5) is another function (`x * 1e-80 * 1e-80`
# exported as 0): that exporter failed, the TorchScript exporter is tried, and both departing is torch.onnx's error.
# Only float64 exports are checked: at fp32 and below a float32 constant is what the format holds, and a wrong op
# translation, which would show at any precision, already shows at fp64 (a default precision).
CHECKED_DTYPE = "float64"

# A departure counts only beyond what the arithmetic itself explains: torch and the evaluator compute the same graph
# in float64 in other orders (BLAS's blocked sums against numpy's, libm's last bit), so each node's result may differ
# between the two by a few units of roundoff (u = 2^-53, 1.1e-16), and these add up along the graph; a sum of K terms
# taken in another order moves by about sqrt(K) u (its roundings add like a random walk). The bound: four u per node
# (one rounding in each evaluation, twice over for a node that calls libm) plus sqrt(K) u for the longest sum, K at
# most the element count of the largest tensor the graph reads (an input or a weight). Measured pure reorderings:
# 0.8u to 4.4u for small graphs (tinybert's 253 nodes 1.6e-16, a LayerNorm whose eps float32 holds exactly 8.5e-17),
# 0.3 sqrt(K) u for long sums (a Linear's 8192-term dot products 2.8e-15, a conv's 2304-term sums 1.2e-15); real
# float32 constants: 6.0e-13 (a 16-wide LayerNorm's eps 1e-5), tinycnn 2.1e-12, float32 scalars 1e-9 and up. Below the
# bound no departure is recorded, so the exporter is never blamed for float64's own rounding; what it hides (a
# 384-wide LayerNorm's eps: 1.4e-14 under a bound of 6.3e-14) is far below fp64's tolerance and changes no verdict.
# A program that itself computes below float64 (the model's own casts) is bounded with its narrowest float's u.
ROUNDING_PER_NODE = 4
FLOAT64_ROUNDOFF = 2.0 ** -53


def export_departure(program, path: Path, args: tuple | None, record: dict) -> str | None:
    """Why the ONNX graph at `path` computes other numbers than `program` on `args` (None: it agrees, or there is
    nothing to check: not a float64 export, or the reference evaluator cannot run the graph). `record` gets what
    the check found, for the cell's info."""
    import torch
    from torch.utils._pytree import tree_flatten

    from fpdiff.core.precision import FP32
    args = tuple(program.example_inputs[0]) if args is None else tuple(args)
    if not _float64_export(program):
        return None
    gross = FP32.tolerance
    try:
        with torch.no_grad():  # on copies: a program that writes its inputs (x.add_, x.resize_) must not change them
            want = [t.detach().double().numpy() if t.is_floating_point() else t.detach().numpy()
                    for t in tree_flatten(program.module()(*fresh(args)))[0] if isinstance(t, torch.Tensor)]
        model = onnx.load(str(path))
        got = _evaluate(model, args)
    except Exception as e:  # a check that cannot run decides nothing: the graph goes on to the backends
        record["onnx_export_check"] = f"{NOT_RUN}: {_why(e)[:MESSAGE_CHARS // 2]}"
        return None
    if len(got) != len(want):
        return f"{len(got)} outputs, the torch program has {len(want)}"
    errs = [compare.rel_l2(w, np.asarray(g)) for w, g in zip(want, got)]
    worst = max(errs, key=lambda e: math.inf if math.isnan(e) else e, default=0.0)
    if not worst <= gross:  # NaN too
        return (f"output {errs.index(worst)} differs by rel L2 {worst:.2e} (float64 reference evaluator vs torch "
                f"eager on the same inputs; more than fp32's tolerance {gross:.0e}: another function)")
    explained = rounding_bound(model, _roundoff(program), tuple(a.numel() for a in args))
    record["onnx_export_explained"] = explained
    if worst <= explained:
        record["onnx_export_check"] = _agrees(worst, explained)
        return None
    record["onnx_export_departure"] = worst
    record["onnx_export_check"] = (
        f"departs from the torch program by rel L2 {worst:.1e} in float64, more than its own rounding explains "
        f"({explained:.1e}): constants or attributes held in float32; the cell is judged with that as its floor")
    return None


def rounding_bound(model: onnx.ModelProto, roundoff: float = FLOAT64_ROUNDOFF, sizes: tuple[int, ...] = ()) -> float:
    """The departure that rounding alone (`roundoff`: the arithmetic's unit roundoff) explains for this graph run on
    inputs of `sizes` elements: two evaluations of one function differ by that much, neither being wrong."""
    nodes = len(model.graph.node) + sum(len(f.node) for f in model.functions)
    declared = [math.prod(d.dim_value for d in i.type.tensor_type.shape.dim if d.dim_value > 0)
                for i in model.graph.input]
    longest = max([*sizes, *declared, *(math.prod(t.dims) for t in model.graph.initializer)], default=1)
    return roundoff * (ROUNDING_PER_NODE * max(nodes, 1) + math.sqrt(longest))


def _agrees(worst: float, explained: float) -> str:
    """The check's word for a graph whose departure its own rounding explains: nothing is the exporter's."""
    return (f"agrees with the torch program in float64 (rel L2 {worst:.1e}, within the {explained:.1e} its own "
            "rounding explains)")


def _float64_export(program) -> bool:
    """Whether the program was exported at fp64: its float weights and inputs (placeholders) are all float64."""
    import torch
    vals = [n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"]
    floats = [v.dtype for v in vals if isinstance(v, torch.Tensor) and v.is_floating_point()]
    return bool(floats) and all(d == torch.float64 for d in floats)


def _roundoff(program) -> float:
    """The unit roundoff of the torch program's narrowest float value (below float64 only by the model's own
    casts): the rounding its own arithmetic explains."""
    import torch
    roundoff = FLOAT64_ROUNDOFF
    for n in program.graph.nodes:
        vals = n.meta.get("val")
        for v in vals if isinstance(vals, (list, tuple)) else [vals]:
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                roundoff = max(roundoff, torch.finfo(v.dtype).eps / 2)
    return roundoff


def _evaluate(model: onnx.ModelProto, args: tuple) -> list:
    """The graph's outputs by the ONNX reference evaluator, with fpdiff's float64-keeping kernels."""
    from onnx.reference import ReferenceEvaluator

    from fpdiff.onnxtools.graph import float64_ops, graph_inputs
    ev = ReferenceEvaluator(model, new_ops=float64_ops())
    feeds = {n: a.detach().numpy() for n, a in zip(graph_inputs(model), args)}
    return ev.run(None, feeds)


# bfloat16 reaches most arithmetic ops of the ONNX standard only at opset 22 (Conv, Gemm's kin, pooling, norms): a
# bf16 program exported at the exporter's default opset 18 is invalid ONNX wherever it has such an op, and a user
# deploying bf16 through ONNX targets 22. Other dtypes keep the exporter's default.
BF16_OPSET = 22


def _dynamo(program, path: Path) -> None:
    import logging

    import torch
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)  # "torchvision is not installed" and such
    opset = {"opset_version": BF16_OPSET} if _computes_in(program, torch.bfloat16) else {}
    with contextlib.redirect_stdout(io.StringIO()):
        onnx_program = torch.onnx.export(program, (), dynamo=True, optimize=False, verbose=False, **opset)
    onnx_program.save(str(path))
    keep_inputs(program, path)


def keep_inputs(program, path: Path) -> None:
    """Puts back the program's inputs the exporter dropped because no op reads their values (a float read only for
    its dtype: `i.to(x.dtype)`; a model's unused token_type_ids): every backend feeds a cell's inputs by position,
    and a graph with fewer inputs would take the wrong tensor in each place after the first one dropped."""
    import onnx
    from onnx import helper
    names = list(program.graph_signature.user_inputs)
    model = onnx.load(str(path), load_external_data=False)
    have = [i.name for i in model.graph.input]
    if have == names or not set(have) <= set(names) or [n for n in names if n in have] != have:
        return  # nothing dropped, or names this check cannot match: the graph is left as the exporter wrote it
    spots = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    made = {i.name: i for i in model.graph.input}
    for name in names:
        if name not in made:
            val = spots[name].meta.get("val")
            made[name] = helper.make_tensor_value_info(name, _onnx_dtype(val.dtype), [
                int(d) if isinstance(d, int) else str(d) for d in val.shape])
    del model.graph.input[:]
    model.graph.input.extend(made[n] for n in names)
    onnx.save(model, str(path))


def _onnx_dtype(dtype) -> int:
    import torch
    from onnx import TensorProto
    return {torch.float64: TensorProto.DOUBLE, torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16,
            torch.bfloat16: TensorProto.BFLOAT16, torch.int64: TensorProto.INT64, torch.int32: TensorProto.INT32,
            torch.bool: TensorProto.BOOL}.get(dtype, TensorProto.FLOAT)


def _computes_in(program, dtype) -> bool:
    """Whether any value of the exported program has `dtype`."""
    import torch
    for n in program.graph.nodes:
        vals = n.meta.get("val")
        if any(isinstance(v, torch.Tensor) and v.dtype == dtype for v in (vals if isinstance(vals, (list, tuple))
                                                                           else [vals])):
            return True
    return False


def _torchscript(program, path: Path, module, args, input_names, dynamic_axes) -> None:
    """The TorchScript exporter traces the module at these inputs. Its constant folding (always on, no switch in
    torch 2.13) only evaluates subgraphs whose inputs are all constants, in their own dtype: `x + 1e-8` stays."""
    import torch
    if module is None:
        module = program.module()  # an unlifted GraphModule: it refuses train(), hence PRESERVE below
    elif not isinstance(module, torch.nn.Module):
        module = module()
    if args is None:
        args = tuple(program.example_inputs[0])
    args = fresh(args)  # tracing runs the module: a module writing its inputs would change the cell's own
    names = list(input_names) if input_names else [f"input{i}" for i in range(len(args))]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # its deprecation notice and tracer warnings; failures still raise
        torch.onnx.export(module, tuple(args), str(path), dynamo=False, input_names=names,
                          dynamic_axes=dynamic_axes, training=torch.onnx.TrainingMode.PRESERVE)


def fresh(args) -> tuple:
    """Copies of the tensors among `args`: what runs the program gets its own, so a program writing its inputs in
    place leaves the inputs every other step (the evaluator, the backend) is fed as they were."""
    import torch
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def _why(e: BaseException) -> str:
    """One line: the exporter's own first sentence, then the innermost cause, where the real reason is."""
    def line(x: BaseException) -> str:
        # torch appends the FX node and the user's traceback after the reason: the reason is enough for one line
        text = " ".join(plain(str(x)).split()).split(" While executing ")[0]
        return f"{type(x).__name__}: {text}" if text else type(x).__name__
    root, seen = e, {id(e)}
    while (nxt := root.__cause__ or root.__context__) is not None and id(nxt) not in seen:
        root = nxt
        seen.add(id(nxt))
    top = line(e).split(". ")[0]
    return (top if root is e else f"{top[:200]} <- {line(root)}")[:MESSAGE_CHARS]


def cast_model(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """Every float computation of the graph in `target` (like .half() on a torch model), typed as the ONNX schema
    allows (onnxtools/mixed.py)."""
    from fpdiff.onnxtools.mixed import cast_model as cast
    return cast(model, target)
