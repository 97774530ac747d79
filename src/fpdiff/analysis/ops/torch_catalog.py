"""The torch catalog: PyTorch's OpInfo database (`op_db`), each chosen sample a Case, each Case a one-op spec file.

Names: an op is its OpInfo `name`, with `.variant_test_name` appended when OpInfo gives one
("nn.functional.avg_pool2d", "nn.functional.interpolate.bilinear"). A case is "OP#I", I the sample's index in
OpInfo's float64 CPU sample list under the seed. Per op the kept samples are, in order: the first sample, the one
with the most elements (its tensor leaves together), then the rest in catalog order, each kept only if it passes
the float64 probe, until `samples` are kept. Samples are drawn under `seed`; a generator that iterates over a set
(meshgrid's indexing modes) orders its samples by Python's string hash, so across processes those few cases agree
only under one PYTHONHASHSEED."""
from __future__ import annotations

import functools
import hashlib
import importlib
import io
import keyword
import random
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from fpdiff.analysis.ops.case import (
    CHANNELS_LAST,
    SAMPLE,
    TORCH_CATALOG,
    TRANSPOSED,
    Case,
    TorchSample,
    keep_first,
    matches,
)
from fpdiff.core.errors import UsageError

OPINFO = "opinfo:"
RANDOM = "random or nondeterministic op"
MUTATES = "writes into its own arguments (its numbers would depend on the order of the jobs)"
RANDOM_SCAN = 64  # samples per op run to see whether it draws random numbers (_draws_random says why 64)
# the description is one terminal/JSON line: shapes and a few scalars say what the case is, the rest is in the payload
DESCRIPTION_CHARS = 160


@functools.lru_cache(maxsize=1)
def _op_db() -> tuple:
    """OpInfo's database, imported once per process (it takes seconds)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as e:  # expecttest and friends are test-time packages of torch
        raise UsageError(f"the torch catalog needs PyTorch's test helpers ({e}); pip install expecttest") from e
    return tuple(op_db)


def op_name(info) -> str:
    """An OpInfo entry's name in this catalog: name, plus .variant_test_name when it has one."""
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


@functools.lru_cache(maxsize=1)
def op_names() -> list[str]:
    """Every op of the catalog, by its name here, sorted."""
    return sorted(op_name(o) for o in _op_db())


@functools.lru_cache(maxsize=1)
def _by_key() -> dict:
    return {(o.name, o.variant_test_name): o for o in _op_db()}


def resolve(fn: str) -> Callable:
    """The callable a TorchSample names: "opinfo:NAME:VARIANT_TEST_NAME" or a dotted "torch.nn.functional.conv1d"."""
    if fn.startswith(OPINFO):
        name, _, vt = fn.removeprefix(OPINFO).rpartition(":")
        info = _by_key().get((name, vt))
        if info is None:
            raise UsageError(f"no OpInfo entry {name!r} (variant {vt!r}) in this torch's op_db")
        return info.op
    parts = fn.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # the longest importable module prefix, then attributes
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            break
        if callable(obj):
            return obj
    raise UsageError(f"cannot resolve op {fn!r}: give opinfo:NAME:VARIANT or a dotted callable such as torch.add")


# ---------------------------------------------------------------------------------------------------------------
# cases


def cases(patterns: list[str] | None, samples: int | None = 2, seed: int = 0) -> tuple[list[Case], list[dict]]:
    """Cases of every op matching `patterns` (None: all), at most `samples` per op (None or < 1: all), and the
    skipped ops with their reason. The same call gives the same cases: samples are drawn under `seed`."""
    out: list[Case] = []
    skipped: list[dict] = []
    for info in _op_db():
        name = op_name(info)
        if patterns is not None and not matches(name, patterns):
            continue
        got, why = _op_cases(info, samples, seed)
        out += got
        if not got:
            skipped.append({"catalog": TORCH_CATALOG, "op": name, "case": "", "reason": why})
    return out, skipped


def _op_cases(info, samples: int | None, seed: int) -> tuple[list[Case], str]:
    """This op's cases, or none and the reason."""
    if torch.float64 not in info.supported_dtypes("cpu"):
        return [], "no float64 kernel on CPU"
    if info.has_nondeterministic_output:  # OpInfo's own word: uninitialized memory (empty*) or racy kernels
        return [], RANDOM + " (OpInfo marks its output nondeterministic)"
    try:
        drawn = _samples(info, seed)
    except Exception as e:  # a sample generator that fails here fails for every backend alike: not the sweep's
        return [], f"sample generation raised {type(e).__name__}"
    if _draws_random(info, drawn, seed):
        return [], RANDOM

    def probe(index: int) -> Case | str:
        got = _unfit(drawn[index]) or _probe(info, index, drawn[index], seed)
        if got == RANDOM:  # one sample differing between seeds is enough: the op draws random numbers
            raise _DrawsRandom
        return got
    try:
        return keep_first(_order(drawn), probe, samples, "no samples at float64 on CPU")
    except _DrawsRandom:
        return [], RANDOM


def deeper(case: Case, count: int, seed: int, keep: Callable[[Case], bool]) -> list[Case]:
    """Up to `count` cases of `case`'s op from its other samples that `keep` accepts, those whose float inputs have
    the most dims first (then by index), each passing the float64 probe as a kept sample does."""
    info = {op_name(o): o for o in _op_db()}.get(case.op)
    if info is None:
        return []
    drawn = _samples(info, seed)
    own = case.case_id.rpartition("#")[2]

    def rank(i: int) -> int:
        return max((t.dim() for t in _leaves(drawn[i]) if isinstance(t, torch.Tensor) and t.is_floating_point()),
                   default=-1)
    order = sorted((i for i in range(len(drawn)) if str(i) != own), key=lambda i: (-rank(i), i))

    def probe(i: int) -> Case | str:
        got = _unfit(drawn[i]) or _probe(info, i, drawn[i], seed)
        return got if isinstance(got, str) or keep(got) else "not kept"
    return keep_first(order, probe, count, "")[0]


class _DrawsRandom(Exception):
    """A sample of the op came out differently under another seed."""


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass


def _samples(info, seed: int) -> list:
    """OpInfo's float64 CPU samples of this op, drawn under `seed` (the same list every call)."""
    _seed_all(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(info.sample_inputs("cpu", torch.float64))


def _leaves(sample) -> list:
    return pytree.tree_leaves(((sample.input, *sample.args), sample.kwargs))


def _order(drawn: list) -> list[int]:
    """Sample indices in the order they are tried: the first, the largest, then the rest in catalog order."""
    if not drawn:
        return []
    sizes = [sum(t.numel() for t in _leaves(s) if isinstance(t, torch.Tensor)) for s in drawn]
    largest = max(range(len(drawn)), key=lambda i: (sizes[i], -i))
    head = [0] if largest == 0 else [0, largest]
    return head + [i for i in range(len(drawn)) if i not in head]


def _unfit(sample) -> str:
    """Why a sample's inputs cannot make a one-op model ("" when they can)."""
    tensors = [t for t in _leaves(sample) if isinstance(t, torch.Tensor)]
    if any(t.layout != torch.strided or t.is_sparse for t in tensors):
        return "sparse or non-strided input"
    if any(t.is_complex() for t in tensors):
        return "complex input"
    if not any(t.is_floating_point() for t in tensors):
        return "no float tensor input (a precision changes nothing)"
    if any(t.numel() == 0 for t in tensors):
        return "empty tensor input"
    if any(isinstance(x, torch.dtype) and x.is_floating_point for x in _leaves(sample)):
        # the sample was drawn at float64 and names it (softmax's dtype=, _softmax_backward_data's input_dtype):
        # every cell would compute in float64 whatever its precision
        return "names a float dtype itself (float64: the cell's precision would not be what it computes in)"
    try:  # the case file holds the arguments: one torch.save cannot store (a memory_format) makes no case
        torch.save([x for x in _leaves(sample) if not isinstance(x, torch.Tensor)], io.BytesIO())
    except Exception:
        return "an argument torch.save cannot store"
    return ""


def _clone(sample) -> tuple[tuple, dict]:
    """Fresh copies of a sample's call arguments: an op must not see a tensor a previous run touched."""
    args, kwargs = pytree.tree_map_only(torch.Tensor, lambda t: t.clone(), ((sample.input, *sample.args),
                                                                               sample.kwargs))
    return args, kwargs


class _SeededRandom(TorchDispatchMode):
    """Notes whether a call reaches an aten op that draws from the generator (bernoulli, normal, native_dropout):
    OpInfo wraps some random ops so they reseed themselves, which two runs under two seeds cannot see."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen = self.seen or torch.Tag.nondeterministic_seeded in func.tags
        return func(*args, **(kwargs or {}))


def _run(info, sample, seed: int) -> tuple[Any, bool]:
    """The op's output on a fresh copy of the sample under `seed`, and whether it drew random numbers."""
    args, kwargs = _clone(sample)
    torch.manual_seed(seed)
    with warnings.catch_warnings(), _SeededRandom() as mode:
        warnings.simplefilter("ignore")
        out = info.op(*args, **kwargs)
    return out, mode.seen


def _mutates(info, sample, seed: int) -> bool:
    """Whether the op writes into its tensor arguments (batch_norm's running statistics in training mode): a cell
    of it sees arguments its judge and baselines changed before it, so its numbers depend on the order they ran."""
    args, kwargs = _clone(sample)
    before = [t.clone() for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        info.op(*args, **kwargs)
    after = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    return not _same(before, after)


def _draws_random(info, drawn: list, seed: int) -> bool:
    """Whether any of the op's first samples draws random numbers: a random op is one whatever its kept samples
    (dropout's first samples have p=0). The first RANDOM_SCAN suffice: a sample generator varies the arguments that
    turn randomness on (p, training) in its outer loops, and scanning all (1,440 for max_pool2d) costs seconds."""
    for sample in drawn[:RANDOM_SCAN]:
        if _unfit(sample):
            continue
        try:
            if _run(info, sample, seed)[1]:
                return True
        except Exception:  # judged per sample by the probe
            continue
    return False


def _outputs(out) -> list[torch.Tensor] | str:
    """An op's output as a flat list of tensors, or why it cannot be judged."""
    leaves = pytree.tree_leaves(out)
    if not leaves or not all(isinstance(t, torch.Tensor) for t in leaves):
        return "non-tensor output"
    if any(t.is_complex() for t in leaves):
        return "complex output"
    if any(t.layout != torch.strided or t.is_sparse for t in leaves):
        return "sparse or non-strided output"
    if any(t.numel() == 0 for t in leaves):
        return "empty output"
    return leaves


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Bitwise-equal outputs, NaN equal to NaN (two runs of a deterministic op)."""
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and bool(
        ((x == y) | (x != x) & (y != y)).all()) for x, y in zip(a, b))


def _probe(info, index: int, sample, seed: int) -> Case | str:
    """The case of one sample, after running it twice at float64 under two seeds; or why it is not one."""
    try:
        out, drew = _run(info, sample, seed + 1)
        first = _outputs(out)
        if isinstance(first, str):
            return first
        out, drew_again = _run(info, sample, seed + 2)
        second = _outputs(out)
    except Exception as e:
        return f"raises at float64 ({type(e).__name__})"
    if drew or drew_again or isinstance(second, str) or not _same(first, second):
        return RANDOM
    if _mutates(info, sample, seed + 1):
        return MUTATES
    args = (sample.input, *sample.args)
    payload = TorchSample(fn=f"{OPINFO}{info.name}:{info.variant_test_name}", args=args, kwargs=dict(sample.kwargs))
    name = op_name(info)
    return Case(TORCH_CATALOG, name, f"{name}#{index}", SAMPLE, describe(args, sample.kwargs),
                integer_valued(pytree.tree_leaves((args, sample.kwargs)), first), payload)


def integer_valued(inputs: list, outputs: list[torch.Tensor]) -> bool:
    """Every float output holds integers while some float input does not (round, floor, sign): such outputs are
    judged by how many elements flip, since a relative error of a rounding step says nothing."""
    floats_out = [t for t in outputs if t.is_floating_point()]
    floats_in = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
    # an output of zeros and NaN only (relu of one negative scalar) holds no rounding step to flip: not counted
    telling = any(bool((torch.isfinite(t) & (t != 0)).any()) for t in floats_out)
    return telling and all(_integers(t) for t in floats_out) and not all(_integers(t) for t in floats_in)


def _integers(t: torch.Tensor) -> bool:
    """Every finite element is an integer (NaN and Inf say nothing either way)."""
    finite = t[torch.isfinite(t)]
    return bool((finite == finite.round()).all())


_SHORT = {torch.float64: "f64", torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
          torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
          torch.bool: "bool"}


class _Shape:
    """A tensor as its dtype and shape in a description."""

    def __init__(self, t: torch.Tensor) -> None:
        self.text = f"{_SHORT.get(t.dtype, str(t.dtype))}{list(t.shape)}"

    def __repr__(self) -> str:
        return self.text


def describe(args: tuple, kwargs: dict) -> str:
    """One line: input shapes and dtypes, and the non-tensor arguments."""
    a, k = pytree.tree_map_only(torch.Tensor, _Shape, (args, kwargs))
    text = ", ".join([repr(x) for x in a] + [f"{n}={v!r}" for n, v in k.items()])
    return text if len(text) <= DESCRIPTION_CHARS else text[:DESCRIPTION_CHARS - 3] + "..."


# ---------------------------------------------------------------------------------------------------------------
# the one-op model


class OneOp(torch.nn.Module):
    """One op as a module: its tensor arguments come in as positional inputs, every other argument is baked in.
    The spec file written for a case subclasses it with a forward that names the inputs."""

    def __init__(self, payload: TorchSample) -> None:
        super().__init__()
        self.fn = resolve(payload.fn)
        leaves, self.tree = pytree.tree_flatten((tuple(payload.args), dict(payload.kwargs)))
        tensors = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        held = [tensors[k] for k in payload.params]
        self.tensor_at = [i for i in tensors if i not in held]
        self.constants = [None if isinstance(x, torch.Tensor) else x for x in leaves]
        self.layer = layer_module(self.fn, payload) if held else None  # a quantizer's view of a conv or linear
        self.weights = torch.nn.ParameterList(torch.nn.Parameter(leaves[i].clone(), requires_grad=False)
                                              for i in ([] if self.layer is not None else held))
        self.held_at = held
        self.layout = payload.layout

    def call(self, *tensors: torch.Tensor):
        """The op on the inputs, each float input reaching it in this case's memory layout."""
        if self.layer is not None:
            return self.layer(self._arrange(tensors[0]))
        leaves = list(self.constants)
        for i, w in zip(self.held_at, self.weights):
            leaves[i] = w
        for i, t in zip(self.tensor_at, tensors):
            leaves[i] = self._arrange(t)
        args, kwargs = pytree.tree_unflatten(leaves, self.tree)
        out = self.fn(*args, **kwargs)
        return tuple(out) if isinstance(out, (list, tuple)) else out

    def _arrange(self, t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point():
            return t
        if self.layout == CHANNELS_LAST and t.dim() in (4, 5):
            return t.contiguous(memory_format=torch.channels_last if t.dim() == 4 else torch.channels_last_3d)
        if self.layout == TRANSPOSED and t.dim() >= 2:  # came in transposed-contiguous: the op gets a strided view
            return t.transpose(-1, -2)
        return t


# F.conv2d's and F.linear's optional arguments after (input, weight), in their positional order
_CONV_ARGS, _LINEAR_ARGS = ("bias", "stride", "padding", "dilation", "groups"), ("bias",)


def layer_module(fn: Callable, payload: TorchSample) -> torch.nn.Module | None:
    """F.conv2d or F.linear whose weight (and bias) are the sample's parameters as the nn.Conv2d or nn.Linear that
    computes the same: a quantizer finds a layer by the module it came from (X86InductorQuantizer, under a
    non-strict export, reads nn_module_stack), and leaves a functional call float. None: another op, or a sample
    whose parameters are not exactly its weight and bias."""
    names = _CONV_ARGS if fn is F.conv2d else _LINEAR_ARGS if fn is F.linear else None
    args = tuple(payload.args)
    if names is None or len(args) < 2 or len(args) > 2 + len(names) or set(payload.kwargs) - set(names):
        return None
    given = {**dict(zip(names, args[2:])), **payload.kwargs}
    w, b = args[1], given.get("bias")
    tensors = [x for x in (args[0], w, b) if isinstance(x, torch.Tensor)]
    if not isinstance(w, torch.Tensor) or len(_tensor_leaves(payload)) != len(tensors) or \
            tuple(payload.params) != tuple(range(1, len(tensors))):
        return None
    if fn is F.linear:
        if w.dim() != 2:
            return None
        layer: torch.nn.Module = torch.nn.Linear(w.shape[1], w.shape[0], bias=b is not None, dtype=w.dtype)
    else:
        if w.dim() != 4 or args[0].dim() != 4:
            return None
        groups = int(given.get("groups", 1))
        layer = torch.nn.Conv2d(w.shape[1] * groups, w.shape[0], tuple(w.shape[2:]), stride=given.get("stride", 1),
                                padding=given.get("padding", 0), dilation=given.get("dilation", 1), groups=groups,
                                bias=b is not None, dtype=w.dtype)
    layer.weight = torch.nn.Parameter(w.clone(), requires_grad=False)
    if b is not None:
        layer.bias = torch.nn.Parameter(b.clone(), requires_grad=False)
    return layer


def load_payload(path: str | Path) -> TorchSample:
    """The TorchSample write_case saved."""
    data = torch.load(path, weights_only=False)  # written by write_case: arguments include dtypes and other objects
    return TorchSample(**{k: v for k, v in data.items() if k != "dims"})


def case_inputs(path: str | Path) -> tuple[torch.Tensor, ...]:
    """The one-op model's inputs: the sample's tensor leaves, float rank >= 2 ones transposed-contiguous under
    TRANSPOSED (the model hands the op their transposed view, which holds the sample's values)."""
    return case_tensors(load_payload(path))


def case_tensors(payload: TorchSample) -> tuple[torch.Tensor, ...]:
    """case_inputs of a payload in memory (its parameters are the model's, not inputs). A transposed input is laid
    out with canonical strides: `.contiguous()` keeps a size-1 dim's stride as it was, which export then declares
    as a permuted dim order (0, 1, 3, 2) that ExecuTorch's XNNPACK delegate refuses at run time."""
    tensors = [t for k, t in enumerate(_tensor_leaves(payload)) if k not in payload.params]
    if payload.layout == TRANSPOSED:
        tensors = [t.transpose(-1, -2).clone(memory_format=torch.contiguous_format)
                   if t.is_floating_point() and t.dim() >= 2 else t for t in tensors]
    return tuple(tensors)


def _tensor_leaves(payload: TorchSample) -> list[torch.Tensor]:
    """The sample's tensors in the order the model takes them."""
    return [x for x in pytree.tree_leaves((tuple(payload.args), dict(payload.kwargs))) if isinstance(x, torch.Tensor)]


def case_dynamic_shapes(path: str | Path, names: list[str]) -> dict | None:
    """torch.export dynamic_shapes of the case: the dims write_case found dynamic, named, shared where export found
    them equal, with the range export found (None when no declared dim stays dynamic)."""
    data = torch.load(path, weights_only=False)
    return named_dims(data.get("dims") or {}, names)


def named_dims(declared: dict, names: list[str]) -> dict | None:
    """{input: {dim: (Dim name, min, max)}} as torch.export's dynamic_shapes (None when nothing is declared)."""
    if not declared:
        return None
    made: dict[str, Any] = {}
    spec: dict = {n: None for n in names}
    for name, per in declared.items():
        spec[name] = {}
        for d, (dim, lo, hi) in per.items():
            if dim not in made:
                made[dim] = torch.export.Dim(dim, min=lo, max=hi)
            spec[name][d] = made[dim]
    return spec


def declare_dims(payload: TorchSample, names: list[str]) -> dict:
    """{input: {dim: (Dim name, min, max)}} for TorchSample.dynamic (dims of the op's view), as torch.export sees
    them; {} when no declaration exports (declare_dims_why says why)."""
    return declare_dims_why(payload, names)[0]


def declare_dims_why(payload: TorchSample, names: list[str]) -> tuple[dict, str]:
    """declare_dims, and why it is {} ("" when it is not). Exported once with Dim.AUTO, a declared dim export keeps
    symbolic becomes a named Dim (dims export finds equal share one, with the range it inferred); one it specializes
    (a reshape to a baked size) is left static, since declaring it would only make export refuse the whole case.
    The ranges are then narrowed to what every shape variant check's grid makes of them (each mix of static and
    dynamic dims) exports with: a declaration one mix refuses is no declaration, never an export error per cell."""
    key = _declaration_key(payload)
    if key not in _DECLARED:
        _DECLARED[key] = _declare(payload, names)
    return _DECLARED[key]


# declarations already made, by payload: the variant making a case and write_case writing it ask for the same one,
# and each costs a few exports (the mixes)
_DECLARED: dict[str, tuple[dict, str]] = {}


def _declaration_key(payload: TorchSample) -> str:
    """The payload as a digest: the callable, the layout, the dims wanted, every argument (tensors by their bytes)."""
    h = hashlib.sha256(repr((payload.fn, payload.layout, payload.dynamic)).encode())
    for x in pytree.tree_leaves((tuple(payload.args), dict(payload.kwargs))):
        if isinstance(x, torch.Tensor):
            h.update(repr((x.dtype, tuple(x.shape))).encode())
            h.update(x.detach().contiguous().cpu().numpy().tobytes())
        else:
            h.update(repr(x).encode())
    return h.hexdigest()


def _declare(payload: TorchSample, names: list[str]) -> tuple[dict, str]:
    tensors = case_tensors(payload)
    wanted: dict = {n: None for n in names}
    for name, t, dims in zip(names, tensors, payload.dynamic):
        if dims:
            wanted[name] = {_passed_dim(t, d, payload.layout): torch.export.Dim.AUTO for d in dims}
    if all(v is None for v in wanted.values()):
        return {}, "no dim declared dynamic"
    model = one_op(payload, names)
    try:
        out = _symbolic(model, tensors, wanted, names)
    except Exception as e:  # the op does not export: every cell says so at its own export stage
        return {}, f"the op does not export ({type(e).__name__})"
    if not out:
        return {}, "torch.export specializes every dim declared dynamic (the op fixes their sizes)"
    try:
        out = _narrowed(model, tensors, out, names)
    except Exception as e:  # a mix export refuses whatever the ranges: no declaration holds for every variant
        return {}, f"torch.export refuses a mix of static and dynamic dims of it ({_first_line(e)})"
    for spec in _variant_specs(out, names):
        try:
            _export(model, tensors, spec)
        except Exception as e:  # UserError, ConstraintViolationError, GuardOnDataDependentSymNode...
            return {}, f"torch.export refuses the declared dims in a shape variant ({_first_line(e)})"
    return out, ""


def _first_line(e: Exception) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:120]}"


def _export(model: torch.nn.Module, tensors: tuple, spec: dict | None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(model, tensors, dynamic_shapes=spec, strict=False)


def _symbolic(model: torch.nn.Module, tensors: tuple, auto: dict, names: list[str]) -> dict:
    """{input: {dim: (Dim name, min, max)}} of the dims an export with `auto` (Dim.AUTO, or STATIC) keeps symbolic,
    with the range it inferred; raises what export raises."""
    ep = _export(model, tensors, auto)
    spots = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    users = [spots[u] for u in ep.graph_signature.user_inputs]
    out: dict = {}
    named: dict = {}  # export's symbol -> the Dim name: the first input and dim that carries it ("input_d0")
    for name, node in zip(names, users):
        for d, how in sorted((auto[name] or {}).items()):
            size = node.meta["val"].shape[d]
            if how is torch.export.Dim.AUTO and isinstance(size, torch.SymInt) and size.node.expr.is_symbol:
                rng = ep.range_constraints.get(size.node.expr)
                lo, hi = (_bound(rng.lower), _bound(rng.upper)) if rng is not None else (None, None)
                dim = named.setdefault(size.node.expr, f"{name}_d{d}")
                out.setdefault(name, {})[d] = (dim, lo, hi)
    return out


def _narrowed(model: torch.nn.Module, tensors: tuple, declared: dict, names: list[str]) -> dict:
    """The declaration with each Dim's range the intersection of the ranges export infers under every mix check's
    grid makes (graph.variants): a dim bounded by another (scatter's index by its input) is unbounded while the other
    is dynamic and bounded by its size once it is static. Raises when a mix specializes a dim declared dynamic."""
    from fpdiff.model import graph
    spec = named_dims(declared, names)
    ranges = {dim: (lo, hi) for per in declared.values() for dim, lo, hi in per.values()}
    for variant in graph.variants(spec)[2:]:  # after static and dynamic: the mixes
        auto = {n: ({d: torch.export.Dim.STATIC if dim in variant.static else torch.export.Dim.AUTO
                     for d, (dim, _, _) in declared[n].items()} if n in declared else None) for n in names}
        got = _symbolic(model, tensors, auto, names)
        for n, per in declared.items():
            for d, (dim, _, _) in per.items():
                if dim in variant.static:
                    continue
                if d not in got.get(n, {}):
                    fixed = sorted(variant.static)
                    verb = 'is' if len(fixed) == 1 else 'are'
                    raise ValueError(f"{dim} becomes static when {', '.join(fixed)} {verb}")
                ranges[dim] = _intersect(ranges[dim], got[n][d][1:])
    single = [dim for dim, (lo, hi) in ranges.items() if lo is not None and hi is not None and lo >= hi]
    if single:  # a Dim of one size is no dim (torch.export.Dim refuses min == max): the sizes are tied
        raise ValueError(f"{single[0]} can take one size only ({ranges[single[0]][0]}) in some mix")
    return {n: {d: (dim, *ranges[dim]) for d, (dim, _, _) in per.items()} for n, per in declared.items()}


def _intersect(a: tuple, b: tuple) -> tuple:
    """Two (min, max) ranges' intersection; None is unbounded."""
    lo = max((x for x in (a[0], b[0]) if x is not None), default=None)
    hi = min((x for x in (a[1], b[1]) if x is not None), default=None)
    return lo, hi


def _variant_specs(declared: dict, names: list[str]) -> list[dict | None]:
    """The dynamic_shapes of every shape variant check's grid runs of the declaration but the static one."""
    from fpdiff.model import graph
    spec = named_dims(declared, names)
    return [v.as_dynamic_shapes(spec) for v in graph.variants(spec)[1:]]


def _passed_dim(t: torch.Tensor, d: int, layout: str) -> int:
    """A dim of the op's view as a dim of the tensor passed in (TRANSPOSED swaps the last two)."""
    r = t.dim()
    d = d % r
    if layout == TRANSPOSED and t.is_floating_point() and r >= 2 and d >= r - 2:
        return (2 * r - 3) - d
    return d


def _bound(value) -> int | None:
    """A range bound as Dim takes it: an int, or None for unbounded."""
    try:
        return int(value) if bool(value.is_finite) else None
    except (TypeError, AttributeError):
        return None


def one_op(payload: TorchSample, names: list[str]) -> OneOp:
    """The one-op module with a forward naming its inputs (torch.export matches dynamic_shapes by those names)."""
    args = ", ".join(names)
    scope: dict = {}
    exec(f"def forward(self, {args}):\n    return self.call({args})\n", scope)  # names come from input_names
    return type("Model", (OneOp,), {"forward": scope["forward"]})(payload)


def input_names(payload: TorchSample) -> list[str]:
    """Python names for the model's inputs, from where each tensor sits in the call: input, arg1, weight, ..."""
    paths = pytree.tree_flatten_with_path((tuple(payload.args), dict(payload.kwargs)))[0]
    names: list[str] = []
    tensor = -1
    for path, leaf in paths:
        if not isinstance(leaf, torch.Tensor):
            continue
        tensor += 1
        if tensor not in payload.params:
            names.append(_unique(_name_of(path), names))
    return names


def _name_of(path) -> str:
    keys = [getattr(k, "idx", getattr(k, "key", None)) for k in path]
    head = keys[1] if len(keys) > 1 else "x"
    base = ("input" if head == 0 else f"arg{head}") if keys and keys[0] == 0 else str(head)
    base = re.sub(r"\W", "_", base)
    if keyword.iskeyword(base) or base in ("self", "") or base[0].isdigit():
        base = f"{base}_"
    return base + "".join(f"_{k}" for k in keys[2:])


def _unique(name: str, taken: list[str]) -> str:
    out, n = name, 1
    while out in taken:
        n += 1
        out = f"{name}{n}"
    return out


_SPEC = '''"""fpdiff ops: {op} ({case_id}, {variant}, layout {layout})."""
from pathlib import Path

from fpdiff.analysis.ops.torch_catalog import OneOp, load_payload, case_dynamic_shapes, case_inputs

CASE = Path(__file__).with_name({pt!r})
CASE_SHA256 = {sha!r}  # the case's values are in CASE: a new case is a new spec (and a new fingerprint)
NAMES = {names!r}
DESCRIPTION = {description!r}


class Model(OneOp):
    def forward(self, {args}):
        return self.call({args})


def model():
    return Model(load_payload(CASE))


def inputs():
    return case_inputs(CASE)
'''

_DYNAMIC = '''

def dynamic_shapes():
    return case_dynamic_shapes(CASE, NAMES)
'''


def slug(case_id: str) -> str:
    """A file name for a case id."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", case_id)


def write_case(case: Case, folder: Path) -> tuple[str, None]:
    """The case as a spec file and its .pt (the payload) in `folder`; fpdiff.sources.load takes the spec."""
    payload: TorchSample = case.payload
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = slug(case.case_id if case.variant == SAMPLE else f"{case.case_id}.{case.variant}")
    pt = folder / f"{base}.pt"
    names = input_names(payload)
    dims = declare_dims(payload, names) if payload.dynamic else {}
    torch.save({"fn": payload.fn, "args": tuple(payload.args), "kwargs": dict(payload.kwargs),
                "layout": payload.layout, "dynamic": tuple(payload.dynamic), "dims": dims,
                "params": tuple(payload.params)}, pt)
    text = _SPEC.format(op=case.op, case_id=case.case_id, variant=case.variant, layout=payload.layout,
                        description=case.description, pt=pt.name,
                        sha=hashlib.sha256(pt.read_bytes()).hexdigest(), names=names, args=", ".join(names))
    if dims:
        text += _DYNAMIC
    spec = folder / f"{base}.py"
    spec.write_text(text)
    return str(spec), None
