"""Shape variants of a model's declared dynamic dims, and the exported program for each (variant, precision)."""
from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fpdiff.core.errors import UsageError
from fpdiff.core.precision import Precision, cast_inputs


@dataclass(frozen=True)
class ShapeVariant:
    name: str
    static: frozenset[str] | None  # names of declared dims kept static; None: all static (no dynamic_shapes)

    def as_dynamic_shapes(self, declared):
        """The declared dynamic_shapes with this variant's static dims marked static (None: fully static)."""
        if self.static is None:
            return None
        return _map_dims(declared, lambda d: torch.export.Dim.STATIC if _dim_name(d) in self.static else d)


STATIC = ShapeVariant("static", None)


def _dim_name(d) -> str:
    return getattr(d, "__name__", None) or str(d)


def _is_dim(x) -> bool:
    return x is not None and x is not torch.export.Dim.STATIC and not isinstance(x, (dict, list, tuple, int))


def _map_dims(spec, fn):
    if isinstance(spec, dict):
        return {k: (fn(v) if _is_dim(v) else _map_dims(v, fn)) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(fn(v) if _is_dim(v) else _map_dims(v, fn) for v in spec)
    return spec


def declared_dims(spec) -> list[str]:
    names: list[str] = []
    _map_dims(spec, lambda d: names.append(_dim_name(d)) or d)
    return sorted(set(names))


def variants(spec, mixed: bool = True) -> list[ShapeVariant]:
    """static, dynamic, and (with `mixed`) mixed: every proper subset of dims kept static for <= 3 dims, else each
    dim alone."""
    if spec is None:
        return [STATIC]
    dims = declared_dims(spec)
    if not dims:
        raise UsageError("dynamic_shapes() declares no dynamic dims")
    out = [STATIC, ShapeVariant("dynamic", frozenset())]
    if not mixed:
        return out
    if len(dims) <= 3:
        subsets = [c for r in range(1, len(dims)) for c in itertools.combinations(dims, r)]
    else:
        subsets = [(d,) for d in dims]
    out += [ShapeVariant("mixed:" + "+".join(s) + "-static", frozenset(s)) for s in subsets]
    return out


def find_variant(spec, name: str) -> ShapeVariant:
    for v in variants(spec):
        if v.name == name:
            return v
    raise UsageError(f"unknown shape variant {name!r}; this model has: {', '.join(v.name for v in variants(spec))}")


def to_device(module: torch.nn.Module, device: str) -> torch.nn.Module:
    """`module` on `device`. A graph torch.export traced (a .pt2's module, plan's mixed programs, locate's segments)
    has the device it was traced on written into its factory ops (transformers' attention bias: `device=cpu`) and may
    hold tensor constants outside its parameters and buffers: both are moved too, or the graph mixes devices."""
    if isinstance(module, torch.fx.GraphModule) and torch.device(device).type != "cpu":
        target = torch.device(device)
        for node in module.graph.nodes:  # `device=` of factory ops, and the device argument of aten.to.device
            if isinstance(node.kwargs.get("device"), torch.device) and node.kwargs["device"] != target:
                node.update_kwarg("device", target)
            if any(isinstance(a, torch.device) and a != target for a in node.args):
                node.args = tuple(target if isinstance(a, torch.device) else a for a in node.args)
            if node.op == "get_attr":
                _move_attr(module, str(node.target), target)
        module.recompile()
    return module.to(device)


def _move_attr(module: torch.nn.Module, target: str, device: torch.device) -> None:
    """A tensor attribute the graph reads (a constant, not a parameter or buffer), moved to `device`."""
    owner, _, name = target.rpartition(".")
    holder = module.get_submodule(owner) if owner else module
    value = getattr(holder, name, None)
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter) and name not in holder._buffers:
        setattr(holder, name, value.to(device))


def cast_module(module: torch.nn.Module, precision: Precision, lazy: bool = False) -> torch.nn.Module:
    """Whole-model cast for cast precisions (like .half()); autocast precisions keep fp32 weights. The copy shares
    the model's weights where the dtype is the same and makes each cast weight once (model/weights.py); `lazy` casts
    each weight when an op reads it."""
    from fpdiff.model.weights import cast_copy
    return cast_copy(module, precision.dtype if precision.is_cast else torch.float32, lazy)


def export(module: torch.nn.Module, inputs: tuple, precision: Precision, variant: ShapeVariant,
           declared, in_place: bool = False, lazy: bool = False) -> torch.export.ExportedProgram:
    """torch.export of the model as the backend gets it: cast to the precision, with the variant's dynamic dims.
    `in_place` casts the caller's module itself instead of a copy (saves one copy of the weights). `lazy`: the
    program's weights are `module`'s own, cast as each op reads them (weights.LazyCast), and no cast copy is made,
    not even to trace: the export traces fake weights (weights.fake_copy)."""
    args = cast_inputs(inputs, precision) if precision.is_cast else tuple(
        t.float() if t.is_floating_point() else t for t in inputs)
    dynamic = variant.as_dynamic_shapes(declared)
    if lazy and precision.is_cast:
        return lazy_export(module, args, precision.dtype, dynamic)
    if in_place:
        m = module.to(precision.dtype) if precision.is_cast else module.float()
    else:
        m = cast_module(module, precision)
    return torch.export.export(m, args, dynamic_shapes=dynamic, strict=False)


def lazy_export(module: torch.nn.Module, args: tuple, dtype: torch.dtype, dynamic=None,
                then: Callable[[torch.export.ExportedProgram], torch.export.ExportedProgram] | None = None,
                ) -> torch.export.ExportedProgram:
    """`module` at `dtype` exported from fake weights (no cast copy), `then` applied to the program (a decomposition
    retraces it: fake weights cost nothing there either), then given `module`'s own weights cast per op. Where the
    fake trace fails or leaves a fake, the export of a real cast copy, given the same (its copy then freed)."""
    from fpdiff.model import weights
    then = then or (lambda program: program)
    try:
        fake, origin = weights.fake_copy(module, dtype)
        program = then(torch.export.export(fake, args, dynamic_shapes=dynamic, strict=False))
        if weights.lazy_program(program, origin):
            return program
    except Exception:  # noqa: BLE001 - any failure of the fake trace: the plain export below decides
        pass
    program = then(torch.export.export(weights.cast_copy(module, dtype), args, dynamic_shapes=dynamic, strict=False))
    weights.lazy_program(program, weights.origin_by_name(program, module))
    return program


def functional(program: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """The program without in-place ops (scatter_ ...), for consumers that need value semantics. Only when
    needed: decomposing also splits composite ops (group_norm) that some importers handle only whole."""
    mutating = any(n.op == "call_function" and getattr(getattr(n.target, "_schema", None), "is_mutable", False)
                   for n in program.graph.nodes)
    return program.run_decompositions({}) if mutating else program


def dynamic_dims(declared, input_names: list[str], variant: ShapeVariant) -> list[list[int]]:
    """Per positional input, the dims this variant leaves dynamic (for torch.compile's mark_dynamic)."""
    spec = variant.as_dynamic_shapes(declared)
    per_input: list = [None] * len(input_names)
    if isinstance(spec, dict):
        per_input = [spec.get(n) for n in input_names]
    elif isinstance(spec, (list, tuple)):
        per_input = list(spec) + [None] * (len(input_names) - len(spec))
    out = []
    for s in per_input:
        if isinstance(s, dict):
            out.append(sorted(int(k) for k, v in s.items() if _is_dim(v)))
        elif isinstance(s, (list, tuple)):
            out.append([i for i, v in enumerate(s) if _is_dim(v)])
        else:
            out.append([])
    return out


def where(node) -> tuple[str, str]:
    """A node's nn.Module path and the user's file:line that made it (torch's own frames skipped)."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    return path, source_line(node.meta.get("stack_trace") or "")


def source_line(trace: str) -> str:
    """`file:line` of the innermost frame of a stack trace that is the user's (torch's own frames skipped)."""
    torch_dir = os.path.dirname(torch.__file__)
    lines = [ln.strip() for ln in trace.splitlines() if ln.strip().startswith("File ") and torch_dir not in ln]
    if not lines:
        return ""
    last = lines[-1]  # innermost frame: the user's line that made this op
    try:
        return f"{last.split(chr(34))[1]}:{last.split('line ')[1].split(',')[0]}"
    except IndexError:
        return last
