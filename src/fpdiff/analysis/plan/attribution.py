"""Each op's share of a low-precision program's output error, to first order, from one float64 pass and one
backward pass: the adjoint method of precision tuning (ADAPT, Menon et al., SC'18). An op's own rounding (the op
at the low precision on its float64 inputs rounded as the program holds them, minus the float64 op) is carried to
the outputs by the float64 gradient along the error's direction; the shares rank which ops to keep in fp32 and
predict how many it takes, so the search tries few keep-sets."""
from __future__ import annotations

import math

import torch
from torch.utils._pytree import tree_flatten, tree_map

from fpdiff.core.errors import NotAnalysable
from fpdiff.model import mixed
from fpdiff.model.weights import LazyCast, cast_is_large, real

FLOATS = (torch.float16, torch.bfloat16, torch.float32)  # dtypes the float64 pass widens, named or held
# A program's views were traced on its own dtypes' kernels; a float64 kernel may lay its output out otherwise (CPU
# attention's math path against the fused one), where view refuses the strides and reshape gives the same values.
_RESHAPE = {torch.ops.aten.view.default: torch.ops.aten.reshape.default,
            torch.ops.aten._unsafe_view.default: torch.ops.aten.reshape.default}


def shares(gm: torch.fx.GraphModule, inputs: tuple, low: torch.dtype) -> dict[str, float]:
    """unit -> the fraction of the pure program's output error (relative to the float64 outputs, along the error's
    direction) that its own rounding makes; inf where the op alone goes non-finite. Raises NotAnalysable (one line)
    when the float64 pass or its gradient cannot be computed, or the pure program is not finite there."""
    try:
        out64, rounding = _float64_pass(gm, inputs)
        err = _pure_error(gm, inputs, low, out64)
        norm2 = float(sum((e * e).sum() for e in err))
        if not math.isfinite(norm2) or norm2 == 0.0:
            raise NotAnalysable("the pure program's outputs are not finite (or exact): no direction to attribute")
        tracked = [(o, e) for o, e in zip(out64, err) if o.requires_grad]
        if not tracked:
            raise NotAnalysable("the outputs do not depend on any float input or weight")
        torch.autograd.backward([o for o, _ in tracked], [e for _, e in tracked])
    except (RuntimeError, TypeError, NotImplementedError) as e:  # an op torch cannot run or differentiate so
        raise NotAnalysable(f"attribution cannot run this program: {' '.join(str(e).split())[:200]}") from e
    return {name: _share(pairs, norm2) for name, pairs in rounding.items()}


def _share(pairs: list[tuple[torch.Tensor, torch.Tensor]], norm2: float) -> float:
    """<d<e, out>/dy, δ> / |e|²: the first-order part of |e|² that this op's rounding δ makes, over |e|²."""
    total = 0.0
    for y, delta in pairs:
        if not bool(torch.isfinite(delta).all()):
            return math.inf  # the op alone overflows (or makes a NaN): first to keep whatever its gradient says
        if y.grad is not None:
            total += float((y.grad * delta).sum())
    return total / norm2


def _wide(a):
    """An argument of the float64 pass: float dtypes it names are float64."""
    return torch.float64 if isinstance(a, torch.dtype) and a in FLOATS else a


def _float64_pass(gm: torch.fx.GraphModule, inputs: tuple):
    """The program in float64 with gradients (inputs and weights as leaves), and for each unit its float64 outputs
    (gradients retained) paired with its own rounding at the program's dtypes."""
    units = {n.name for n in mixed.units(gm)}
    env: dict[str, object] = {}
    rounding: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {}
    feed = iter(inputs)
    out64: list[torch.Tensor] = []
    with torch.enable_grad():
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                env[n.name] = _leaf(next(feed))
            elif n.op == "get_attr":
                env[n.name] = _wide_value(_attr(gm, n.target))  # constants: a gradient is needed of none
            elif n.op == "call_function":
                args, kwargs = tree_map(lambda a: env[a.name] if isinstance(a, torch.fx.Node) else _wide(a),
                                        (n.args, n.kwargs))
                env[n.name] = _call(n, args, kwargs)
                if n.name in units:
                    env[n.name] = tree_map(_tracked, env[n.name])
                    rounding[n.name] = _own_rounding(n, env)
            elif n.op == "output":
                flat = tree_flatten(tree_map(lambda a: env[a.name] if isinstance(a, torch.fx.Node) else a,
                                             n.args))[0]
                out64 = [t for t in flat if isinstance(t, torch.Tensor) and t.is_floating_point()]
            elif not (n.op == "call_module" and str(n.target).startswith("_guards")):  # guards: no arithmetic
                raise NotAnalysable(f"attribution cannot step through graph node {n.op} {n.target}")
    return out64, rounding


def _call(n: torch.fx.Node, args, kwargs):
    """A graph node's op on these arguments, a view as a reshape (the float64 layout may differ from the traced)."""
    return _RESHAPE.get(n.target, n.target)(*args, **kwargs)


def _attr(gm: torch.fx.GraphModule, target: str):
    owner_path, _, leaf = target.rpartition(".")
    return getattr(gm.get_submodule(owner_path) if owner_path else gm, leaf)


def _leaf(t):
    """A float tensor as a float64 leaf that records its uses; anything else as it is."""
    if isinstance(t, torch.Tensor) and t.is_floating_point():
        return t.detach().to(torch.float64).requires_grad_()
    return t


def _wide_value(t):
    """A weight or constant seen in float64, no gradient (batch norm's running statistics must not ask for one):
    cast as each op reads it (LazyCast), so the pass holds no float64 copy of the model, nor does its backward."""
    if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
        return t
    t = real(t.detach())
    return LazyCast(t, torch.float64, views=True) if t.dtype != torch.float64 else t


def _tracked(t):
    """A unit's float value made from weights alone becomes a leaf, so its gradient is recorded like any other."""
    if isinstance(t, torch.Tensor) and t.is_floating_point() and not t.requires_grad:
        return t.requires_grad_()
    return t


def _held(a: torch.fx.Node, env: dict):
    """A value as the program holds it: the float64 value rounded to the program's dtype of that value."""
    v = env[a.name]
    dt = mixed._pd(a)
    if isinstance(v, torch.Tensor):
        return v.detach().to(dt) if dt is not None and v.is_floating_point() else v.detach()
    return tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, v)


def _own_rounding(n: torch.fx.Node, env: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The unit at the program's dtypes on its rounded float64 inputs, minus its float64 outputs: what keeping it
    in fp32 (and its inputs' rounding with it) takes away. An op with no kernel at the low dtype here gives none."""
    args, kwargs = tree_map(lambda a: _held(a, env) if isinstance(a, torch.fx.Node) else a, (n.args, n.kwargs))
    try:
        with torch.no_grad():
            low = _call(n, args, kwargs)
    except (RuntimeError, NotImplementedError):  # no low kernel on this device: no evidence for this op
        return []
    pairs = []
    for y, yl in zip(tree_flatten(env[n.name])[0], tree_flatten(low)[0]):
        if isinstance(y, torch.Tensor) and y.is_floating_point() and isinstance(yl, torch.Tensor):
            if y.requires_grad:
                y.retain_grad()
            pairs.append((y, yl.detach().to(torch.float64) - y.detach()))
    return pairs


def _pure_error(gm: torch.fx.GraphModule, inputs: tuple, low: torch.dtype,
                out64: list[torch.Tensor]) -> list[torch.Tensor]:
    """The pure program's outputs (every unit at the low dtype, as its trial runs it) minus the float64 outputs."""
    pure = mixed.apply(gm, frozenset(), low, lazy=cast_is_large(gm, low))  # no low copy of a large model
    with torch.no_grad():
        flat = tree_flatten(pure(*[t.float() if t.is_floating_point() else t for t in inputs]))[0]
    outs = [t for t in flat if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if len(outs) != len(out64):
        raise NotAnalysable("the pure program and its float64 pass give different outputs")
    return [p.detach().to(torch.float64) - o.detach() for p, o in zip(outs, out64)]
