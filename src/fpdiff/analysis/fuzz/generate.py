"""Random valid fuzz graphs: ops drawn from the vocabulary, typed by their own inference, chained so that every op
feeds the output, with one memory layout for all inputs, some dynamic dims, a value range per input, and input values
whose float64 reference is finite (the judge needs a finite truth). The same seed and options give the same graph,
values and id on every host: only seeded generators are used, over sorted names, never over hash order."""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fpdiff.analysis.fuzz.graph import (
    ALL_FORMS,
    BOOL,
    FLOAT,
    FORMS,
    INT64,
    Graph,
    Input,
    Node,
    Sample,
    TensorType,
    attrs_of,
    written_as,
)
from fpdiff.analysis.fuzz.vocab import ANY, NONZERO, POSITIVE, UNIT, VOCAB, OpDef
from fpdiff.analysis.fuzz.vocab_index import DISTINCT, INDEX, MASK, UNIQUE
from fpdiff.analysis.fuzz.vocab_nn import ATTN_MASK
from fpdiff.analysis.ops.case import CHANNELS_LAST, CONTIGUOUS, TRANSPOSED, matches
from fpdiff.analysis.ops.catalog import closest
from fpdiff.analysis.ops.variants import NEAR_MAX, POSITIVE_OFFSET, TINY_RANGE
from fpdiff.core.errors import UsageError

# dims a new input's shape is drawn from: 1 (a broadcast dim), small odd sizes, and sizes around vector widths
# (7, 17, 63, 65: the tail a vectorized or tiled kernel handles apart from its body)
DIMS = (1, 2, 3, 4, 5, 7, 8, 16, 17, 32, 63, 64, 65)
RANKS, RANK_WEIGHTS = (1, 2, 3, 4), (0.15, 0.35, 0.25, 0.25)
# a graph's inputs and any value in it stay at or below this many elements: a bug shows at a tail or an edge,
# not at volume, and a campaign's graphs per minute depend on small graphs
MAX_ELEMENTS = 1 << 14
# the float64 reference of a graph's values is drawn this many times before the graph is discarded: the first
# redraw answers a value-specific overflow (an exact 0 from small-int under a division, a sigmoid that underflows
# to 0 before a log); the later ones also swap near-max inputs for `large` (a structural overflow: exp or a square
# of 3e4), as the ops near-max variant falls back to sqrt(NEAR_MAX)
REDRAWS, SHRINK_FROM = 4, 2
# a graph that cannot be built from the allowed ops (domains without a guard, shapes that never fit) is tried
# afresh this many times, each try adding at most TRIES candidate ops
BUILDS, TRIES, ARG_DRAWS = 8, 60, 4
DYNAMIC_SHARE = 0.3  # graphs with some dims exported as dynamic: the exporters' symbolic-shape paths
# how many axes a dynamic graph makes dynamic, drawn evenly: one (static and dynamic runs), two (and each mix of them
# static), or every axis of size > 1 (its fully dynamic run has no static dim left: SEEDS #2's "right with all dims
# dynamic", beside mixes that keep one dim static); check runs at most 2 + 6 shape variants of a graph
ALL_AXES = 0
MIXED_AXES = (1, 2, ALL_AXES)


@dataclass(frozen=True)
class Range:
    """A value range of a graph input: why it finds bugs, how its float64 values are drawn, which argument domains
    its values meet (vocab ANY/POSITIVE/NONZERO/UNIT), and how often a new input draws it."""
    reason: str
    draw: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]
    meets: frozenset = field(default_factory=lambda: frozenset({ANY}))
    weight: float = 1.0


def _signed(rng: np.random.Generator, shape: tuple[int, ...], mags: np.ndarray) -> np.ndarray:
    return np.where(rng.random(shape) < 0.5, -1.0, 1.0) * mags


RANGES: dict[str, Range] = {
    "normal": Range("the common case: N(0, 1)", lambda r, s: r.standard_normal(s), frozenset({ANY}), 0.45),
    "positive": Range(f"|N(0, 1)| + {POSITIVE_OFFSET}: log, sqrt, reciprocal and pow away from their poles",
                      lambda r, s: np.abs(r.standard_normal(s)) + POSITIVE_OFFSET,
                      frozenset({ANY, POSITIVE, NONZERO}), 0.1),
    "unit": Range("U(-1, 1): asin, acos, atanh's domain, values that fp16 holds to 1e-3 near +-1",
                  lambda r, s: r.uniform(-1.0, 1.0, s), frozenset({ANY, UNIT}), 0.1),
    "near-max": Range(f"|x| in [{NEAR_MAX / 4:.0f}, {NEAR_MAX:.0f}]: fp16 nears its max 65504 at the first sum or "
                      "square while float64 stays far from overflow",
                      lambda r, s: _signed(r, s, r.uniform(0.25, 1.0, s) * NEAR_MAX), frozenset({ANY, NONZERO}), 0.12),
    "large": Range(f"|x| up to sqrt({NEAR_MAX:.0f}) = {math.sqrt(NEAR_MAX):.0f}: a product of two nears fp16's max "
                   "(what near-max falls back to where its float64 reference overflows)",
                   lambda r, s: _signed(r, s, r.uniform(0.25, 1.0, s) * math.sqrt(NEAR_MAX)),
                   frozenset({ANY, NONZERO}), 0.0),
    "tiny": Range(f"|x| log-uniform in {list(TINY_RANGE)}: fp16's subnormals, lost where a backend flushes them",
                  lambda r, s: _signed(r, s, 10.0 ** r.uniform(*np.log10(TINY_RANGE), s)),
                  frozenset({ANY, NONZERO}), 0.12),
    "small-int": Range("integers in [-4, 4] held as floats: exact ties, zeros and the integer paths of rounding ops",
                       lambda r, s: r.integers(-4, 5, s).astype(np.float64), frozenset({ANY}), 0.11),
}
NORMAL, LARGE = "normal", "large"
SHRINK = {"near-max": LARGE}  # what a range becomes in the later redraws

# ops put before an argument fed by another node when its domain needs it, by the op names they need in the vocab:
# abs + a positive input (the eps) meets POSITIVE whatever comes in; sigmoid (0, 1) and tanh [-1, 1] are one op each
GUARDS: dict[str, tuple[tuple[str, ...], ...]] = {
    POSITIVE: (("abs", "add"), ("sigmoid",)),
    NONZERO: (("abs", "add"), ("sigmoid",)),
    UNIT: (("tanh",), ("sigmoid",)),
}
COMBINERS = ("add", "mul", "sub")  # binary ops that fold a dead branch into the output
# a dead branch is returned as a further output instead in this share of folds, at most MAX_EXTRA per graph: models
# return several tensors (logits and a hidden state, values and indices), and a compiler must keep a value it fused
# away from one consumer alive for the other
EXTRA_SHARE, MAX_EXTRA = 0.3, 2


@dataclass(frozen=True)
class Discard:
    """A seed that gave no sample, and why (a campaign counts discards by reason)."""
    reason: str
    seed: int


NOT_FINITE = "float64 reference not finite"
NO_GRAPH = "no valid graph from these ops"


def select_ops(patterns: list[str] | None) -> list[str]:
    """The vocabulary ops (sorted names) whose name or a catalog name matches any pattern; a pattern matching none
    is one UsageError with the closest names."""
    names = sorted(VOCAB)
    if not patterns:
        return names
    for p in patterns:
        if not any(_op_matches(VOCAB[n], [p]) for n in names):
            known = names + sorted({c for n in names for c in VOCAB[n].catalog})
            raise UsageError(f"no fuzz vocabulary op matches {p!r}; closest: {', '.join(closest(p, known))}")
    return [n for n in names if _op_matches(VOCAB[n], patterns)]


def _op_matches(op: OpDef, patterns: list[str]) -> bool:
    return any(matches(name, patterns) for name in (op.name, *op.catalog))


def generate(seed: int, *, ops: list[str] | None = None, min_ops: int = 2, max_ops: int = 6, form: str | None = None,
             forms: tuple = FORMS) -> Sample | Discard:
    """One sample for a seed: a random valid graph of min_ops..max_ops live ops and input values whose float64
    reference is finite, or a Discard saying why none."""
    allowed = select_ops(ops)
    if not allowed:
        raise UsageError("the fuzz vocabulary holds no ops")
    _check_options(min_ops, max_ops, form, forms)
    rnd = random.Random(seed)
    # the form has a generator of its own: the same seed gives the same graph in either form (over ops both forms
    # have: a cast region is a torch program's only)
    form = form or random.Random(f"form:{seed}").choice(sorted(forms))
    allowed = [n for n in allowed if written_as(form) in VOCAB[n].forms]  # a cast region: a torch program only
    if not allowed:
        return Discard(NO_GRAPH, seed)
    graph = _build(rnd, allowed, rnd.randint(min_ops, max_ops), min_ops, max_ops)
    if graph is None:
        return Discard(NO_GRAPH, seed)
    return _with_values(graph, form, seed)


def _check_options(min_ops: int, max_ops: int, form: str | None, forms: tuple) -> None:
    if not 1 <= min_ops <= max_ops:
        raise UsageError(f"fuzz graph sizes need 1 <= min_ops <= max_ops, got {min_ops}..{max_ops}")
    bad = [f for f in ((form,) if form else tuple(forms)) if f not in ALL_FORMS]
    if bad or not (form or forms):
        raise UsageError(f"unknown fuzz graph form {bad[0] if bad else '(none)'}; known: {', '.join(ALL_FORMS)}")


# ---------------------------------------------------------------------------------------------------------------
# the graph


class _Draft:
    """A graph being built: inputs appear as ops ask for them, so values get draft refs (input k: -(k+1), node i: i)
    that `graph` renumbers into the IR's ids (inputs first)."""

    def __init__(self) -> None:
        self.inputs: list[Input] = []
        self.nodes: list[tuple[str, tuple[int, ...], dict]] = []
        self.types: dict[int, TensorType] = {}
        self.order: list[int] = []  # refs in creation order: recency
        self.uses: dict[int, int] = {}
        self.extra: list[int] = []  # branches returned as further outputs

    def add_input(self, t: TensorType, range_name: str) -> int:
        self.inputs.append(Input(t, range=range_name))
        return self._add(-len(self.inputs), t)

    def add_node(self, op: str, args: tuple[int, ...], attrs: dict, t: TensorType) -> int:
        self.nodes.append((op, args, attrs))
        for a in args:
            self.uses[a] += 1
        return self._add(len(self.nodes) - 1, t)

    def _add(self, ref: int, t: TensorType) -> int:
        self.types[ref], self.uses[ref] = t, 0
        self.order.append(ref)
        return ref

    def frontier(self) -> list[int]:
        """Node values nothing consumes yet (the last is the output to be; the others are dead branches)."""
        return [r for r in self.order if r >= 0 and self.uses[r] == 0]

    def range_of(self, ref: int) -> str | None:
        return self.inputs[-ref - 1].range if ref < 0 else None

    def size_after(self, new_nodes: int, consumed: set[int]) -> int:
        """Ops the graph ends with when new_nodes are added consuming `consumed` (dead branches fold in one op each)."""
        front = [r for r in self.frontier() if r not in consumed]
        return len(self.nodes) + new_nodes + len(front)

    def graph(self) -> Graph:
        n_in = len(self.inputs)

        def vid(ref: int) -> int:
            return -ref - 1 if ref < 0 else n_in + ref
        nodes = tuple(Node(op, tuple(vid(a) for a in args), attrs_of(attrs)) for op, args, attrs in self.nodes)
        return Graph(tuple(self.inputs), nodes, n_in + len(nodes) - 1, tuple(vid(r) for r in self.extra))


def _build(rnd: random.Random, allowed: list[str], target: int, min_ops: int, max_ops: int) -> Graph | None:
    """A live graph of target ops or close (min_ops..max_ops), with layout and dynamic dims; None when BUILDS tries
    fail."""
    for _ in range(BUILDS):
        d = _Draft()
        for _ in range(TRIES):
            if len(d.nodes) + len(d.frontier()) - 1 >= target and d.nodes:
                break
            _add_op(rnd, d, allowed, max_ops)
            if d.nodes and _integer(d, len(d.nodes) - 1):  # an integer-valued op ends the graph (_feeds_integer)
                break
        if not d.nodes or not _fold_dead(rnd, d, allowed, max_ops) or len(d.nodes) < min_ops:
            continue
        if d.types[len(d.nodes) - 1].dtype != FLOAT:  # the judge compares a float output
            continue
        return _finish(rnd, d.graph())
    return None


def _add_op(rnd: random.Random, d: _Draft, allowed: list[str], max_ops: int) -> bool:
    """Adds one op drawn at random (with its guards and new inputs); False when no draw of its arguments fit. After
    an integer or mask value, an op that takes one: such a value cannot be the output, nor folded into it."""
    front = d.frontier()
    pending = d.types[front[-1]].dtype if front and d.types[front[-1]].dtype != FLOAT else None
    takers = [n for n in allowed if pending in VOCAB[n].arg_dtypes and pending not in _fresh_dtypes(VOCAB[n])]
    op = VOCAB[rnd.choice(takers if pending and takers else allowed)]
    # arguments drawn again for the same op: conv, matmul and pooling fit fewer shapes than elementwise ops, and
    # without retries they would appear far less often than the op draw gives them
    for _ in range(ARG_DRAWS):
        if _try_op(rnd, d, op, allowed, max_ops):
            return True
    return False


def _fresh_dtypes(op: OpDef) -> set[str]:
    return {_arg_dtype(op, j) for j in op.fresh}


def _try_op(rnd: random.Random, d: _Draft, op: OpDef, allowed: list[str], max_ops: int) -> bool:
    """Adds the op on one draw of its arguments; False when they did not fit."""
    sources = _sources(rnd, d, op)
    if any(_integer(d, r) for r in sources if r is not None):
        return False
    types = _fit_types(rnd, d, op, sources)
    if types is None:
        return False
    attrs = op.draw(rnd, types)
    if attrs is None:
        return False
    try:
        out = op.infer(types, attrs)
    except ValueError:
        return False
    if _numel(out.shape) > MAX_ELEMENTS:
        return False
    plan = _guard_plan(rnd, d, op, sources, allowed)
    if plan is None:
        return False
    consumed = {s for s in sources if s is not None}
    if d.size_after(1 + sum(len(g) for g in plan.values()), consumed) > max_ops:
        return False
    args = tuple(_materialize(rnd, d, op, j, s, types, attrs, plan.get(j, ())) for j, s in enumerate(sources))
    d.add_node(op.name, args, attrs, out)
    return True


def _arg_dtype(op: OpDef, j: int) -> str:
    return op.arg_dtypes[j] if j < len(op.arg_dtypes) else FLOAT


def _domain(op: OpDef, j: int) -> str:
    return op.domain[j] if j < len(op.domain) else ANY


def _sources(rnd: random.Random, d: _Draft, op: OpDef) -> list[int | None]:
    """Per argument, an existing value (the newest dead branch first, so ops chain; any recent one, so values fan
    out) or None for a new input."""
    out: list[int | None] = []
    for j in range(op.arity):
        dt = _arg_dtype(op, j)
        if j in op.fresh:  # values only the op's own range makes valid (distinct keys of a selection)
            out.append(None)
            continue
        pool = [r for r in d.order if d.types[r].dtype == dt]
        front = [r for r in d.frontier() if d.types[r].dtype == dt and r not in out]
        x = rnd.random()
        if front and x < (0.75 if j == 0 else 0.35):
            out.append(front[-1] if j == 0 else rnd.choice(front))
        elif pool and x < (0.9 if j == 0 else 0.6):
            out.append(rnd.choices(pool, weights=[0.6 ** (len(pool) - 1 - i) for i in range(len(pool))])[0])
        else:
            out.append(None)
    return out


def _fit_types(rnd: random.Random, d: _Draft, op: OpDef, sources: list[int | None]) -> list[TensorType] | None:
    """The argument types, new inputs' shapes drawn to fit the existing arguments (the op's infer says they do)."""
    known = [d.types[s] for s in sources if s is not None and d.types[s].dtype == FLOAT]
    ref = known[0].shape if known else _fresh_shape(rnd)
    for _ in range(8):  # a few shape draws: most ops take the first (elementwise, same shape); matmul, conv need more
        types: list[TensorType | None] = [d.types[s] if s is not None else None for s in sources]
        for j in range(op.arity):  # new inputs in argument order, each seeing the types decided before it
            if types[j] is None:
                types[j] = _new_type(rnd, op, j, types, ref, j == 0 and not known)
        if all(t is not None and _numel(t.shape) <= MAX_ELEMENTS for t in types) and _infers(rnd, op, types):
            return types
    return None


def _new_type(rnd: random.Random, op: OpDef, j: int, types: list, ref: tuple[int, ...],
              same: bool) -> TensorType | None:
    """A new input's type: the op's own (an index fits what it indexes), else a shape near the first float's."""
    t = op.arg_type(rnd, j, types) if op.arg_type else None
    if t is not None:
        return t
    if _arg_dtype(op, j) == INT64:
        return None  # an index without the op's say has no known bound
    return TensorType(_shape_near(rnd, ref, same), _arg_dtype(op, j))


def _infers(rnd: random.Random, op: OpDef, types: list[TensorType]) -> bool:
    # a probe on a copy of the generator: the attributes the op takes are drawn again, from `rnd`, once it fits
    attrs = op.draw(random.Random(rnd.getrandbits(32)), types)
    if attrs is None:
        return False
    try:
        op.infer(types, attrs)
    except ValueError:
        return False
    return True


def _fresh_shape(rnd: random.Random) -> tuple[int, ...]:
    rank = rnd.choices(RANKS, weights=RANK_WEIGHTS)[0]
    return _capped([rnd.choice(DIMS) for _ in range(rank)], rnd)


def _capped(dims: list[int], rnd: random.Random) -> tuple[int, ...]:
    """The dims with the largest cut to a smaller size until the tensor fits MAX_ELEMENTS."""
    dims = list(dims)
    while _numel(dims) > MAX_ELEMENTS:
        i = max(range(len(dims)), key=lambda k: (dims[k], -k))
        dims[i] = rnd.choice([x for x in DIMS if x < dims[i]])
    return tuple(dims)


def _shape_near(rnd: random.Random, ref: tuple[int, ...], same: bool) -> tuple[int, ...]:
    """A new input's shape beside an argument of shape `ref`: the same, broadcastable (size-1 dims, a lower rank),
    a matmul or conv partner, a per-channel vector, or a fresh one."""
    if same or not ref:
        return ref or _fresh_shape(rnd)
    r, d = len(ref), rnd.choice(DIMS[1:])
    kinds = [ref, tuple(1 if rnd.random() < 0.5 else x for x in ref), ref[rnd.randint(1, r - 1):] if r > 1 else ref,
             (1,), ref[:-2] + (ref[-1], d) if r >= 2 else (ref[-1], d), _fresh_shape(rnd)]
    if r >= 2:
        kinds += [(ref[1],), (1, ref[1]) + (1,) * (r - 2)]
    if r >= 3:
        kinds.append((d, ref[1]) + (rnd.choice((1, 3)),) * (r - 2))
    return _capped(list(rnd.choices(kinds, weights=[4, 3, 3, 1, 2, 1] + [1] * (len(kinds) - 6))[0]), rnd)


def _numel(shape) -> int:
    return math.prod(shape)


# ---------------------------------------------------------------------------------------------------------------
# domains: guards before an argument, ranges of new inputs


def _meets(d: _Draft, ref: int, domain: str) -> bool:
    name = d.range_of(ref)
    return domain == ANY or (name is not None and name in RANGES and domain in RANGES[name].meets)


def _guard_plan(rnd: random.Random, d: _Draft, op: OpDef, sources: list[int | None],
                allowed: list[str]) -> dict[int, tuple[str, ...]] | None:
    """Per argument fed by a value outside its domain, the guard ops to put before it; None when no allowed guard."""
    plan: dict[int, tuple[str, ...]] = {}
    for j, s in enumerate(sources):
        dom = _domain(op, j)
        if s is None or _meets(d, s, dom) or _arg_dtype(op, j) != FLOAT:
            continue
        usable = [g for g in GUARDS.get(dom, ()) if all(n in allowed for n in g)]
        if not usable:
            return None
        plan[j] = rnd.choice(usable)
    return plan


def _materialize(rnd: random.Random, d: _Draft, op: OpDef, j: int, source: int | None, types: list[TensorType],
                 attrs: dict, guard: tuple[str, ...]) -> int:
    """The value id an argument takes: a new input (with the range the op asks, else one that meets its domain), or
    the source behind its guard ops."""
    if source is None:
        t = types[j]
        asked = op.arg_range(j, types, attrs) if op.arg_range else None
        return d.add_input(t, asked or _draw_range(rnd, _domain(op, j), t.dtype))
    ref = source
    if guard == ("abs", "add"):
        ref = _node(d, "abs", (ref,))
        # a positive input of size-1 dims (>= 0.01): abs(x) + eps is never 0, and the value keeps its shape
        eps = d.add_input(TensorType((1,) * d.types[ref].rank, FLOAT), "positive")
        return _node(d, "add", (ref, eps))
    for g in guard:
        ref = _node(d, g, (ref,))
    return ref


def _node(d: _Draft, name: str, args: tuple[int, ...]) -> int:
    """A guard node: the vocab op applied with no attributes beyond what its draw gives for these types."""
    op, types = VOCAB[name], [d.types[a] for a in args]
    attrs = op.draw(random.Random(0), types) or {}
    return d.add_node(name, args, attrs, op.infer(types, attrs))


def _draw_range(rnd: random.Random, domain: str, dtype: str) -> str:
    if dtype != FLOAT:
        return "small-int" if dtype == INT64 else NORMAL
    names = [n for n in sorted(RANGES) if domain in RANGES[n].meets and RANGES[n].weight > 0]
    return rnd.choices(names, weights=[RANGES[n].weight for n in names])[0]


def _fold_dead(rnd: random.Random, d: _Draft, allowed: list[str], max_ops: int) -> bool:
    """Folds every dead branch into the output with a combiner op, or (in some graphs) returns it as a further
    output; False when one does not fit."""
    combiners = [c for c in COMBINERS if c in allowed]
    while len(d.frontier()) > 1:
        out, dead = d.frontier()[-1], d.frontier()[0]
        if _integer(d, out) or _integer(d, dead) or FLOAT != d.types[out].dtype or FLOAT != d.types[dead].dtype:
            return False
        if len(d.extra) < MAX_EXTRA and rnd.random() < EXTRA_SHARE:
            d.extra.append(dead)
            d.uses[dead] += 1  # returned: no longer a dead branch
            continue
        fits = [c for c in rnd.sample(combiners, len(combiners)) if _fits(c, [d.types[out], d.types[dead]])]
        if not fits or len(d.nodes) >= max_ops:
            return False
        _node(d, fits[0], (out, dead))
    return True


def _integer(d: _Draft, ref: int) -> bool:
    """Whether a draft value is an integer-valued op's output (round, floor, sign). Such an output is only ever the
    graph's output, judged by flips: fed on, one rounding flip at a .5 boundary becomes a jump of 1 that any later
    op scales (the integer steps after Round/Floor that make most of a fixed-tolerance fuzzer's false reports)."""
    return ref >= 0 and VOCAB[d.nodes[ref][0]].integer_valued


def _fits(name: str, types: list[TensorType]) -> bool:
    op = VOCAB[name]
    attrs = op.draw(random.Random(0), types)
    if attrs is None:
        return False
    try:
        return _numel(op.infer(types, attrs).shape) <= MAX_ELEMENTS
    except ValueError:
        return False


# ---------------------------------------------------------------------------------------------------------------
# layout, dynamic dims, values


def _finish(rnd: random.Random, g: Graph) -> Graph:
    """The graph with one layout for all its inputs and, in some graphs, dynamic dims."""
    floats = [x.type.rank for x in g.inputs if x.type.dtype == FLOAT]
    layouts, weights = [CONTIGUOUS], [4.0]  # contiguous mostly: what most programs hand a backend
    if 4 in floats:
        layouts, weights = layouts + [CHANNELS_LAST], weights + [2.0]
    if any(r >= 2 for r in floats):
        layouts, weights = layouts + [TRANSPOSED], weights + [2.0]
    layout = rnd.choices(layouts, weights=weights)[0]
    dyn = _dynamic(rnd, g) if rnd.random() < DYNAMIC_SHARE else [()] * len(g.inputs)
    inputs = tuple(Input(x.type, layout, dims, x.range) for x, dims in zip(g.inputs, dyn))
    return Graph(inputs, g.nodes, g.output, g.extra)


def _dynamic(rnd: random.Random, g: Graph) -> list[tuple[int, ...]]:
    """Per input, the dims exported as dynamic: one, two or all axes (counted from the end, as broadcasting aligns
    them) of one size each, in every input that has that size there, so broadcast partners vary together. Several
    dims make check run each mix of them static and dynamic (SEEDS #2: right at the ends, wrong in a mix).
    Sizes 1 are never dynamic (exporters specialize 0 and 1); dims an op needs static (a conv's weight, a norm's
    channels: OpDef.static) are not either."""
    fixed = _static_dims(g)
    spots = sorted({(x.type.rank - i, s) for k, x in enumerate(g.inputs)
                    for i, s in enumerate(x.type.shape) if s > 1 and (k, i) not in fixed})
    if not spots:
        return [()] * len(g.inputs)
    axes = rnd.choice(MIXED_AXES)
    chosen = spots if axes == ALL_AXES else rnd.sample(spots, min(len(spots), axes))
    out = []
    for k, x in enumerate(g.inputs):
        dims = {x.type.rank - back for back, size in chosen
                if x.type.rank >= back and x.type.shape[x.type.rank - back] == size}
        out.append(tuple(sorted(d for d in dims if (k, d) not in fixed)))
    return out


def _static_dims(g: Graph) -> set[tuple[int, int]]:
    """(input, dim) pairs an op needs static, for the inputs that feed such an op's argument directly."""
    from fpdiff.analysis.fuzz.emit import value_types
    types, n_in, out = value_types(g), len(g.inputs), set()
    for node in g.nodes:
        op = VOCAB[node.op]
        if op.static is None:
            continue
        for j, d in op.static([types[a] for a in node.args], node.attr):
            if j < len(node.args) and node.args[j] < n_in:
                out.add((node.args[j], d))
    return out


def _with_values(graph: Graph, form: str, seed: int) -> Sample | Discard:
    """The sample with input values whose float64 reference is finite, or the Discard after REDRAWS draws."""
    from fpdiff.analysis.fuzz.emit import evaluate_all
    rng = np.random.default_rng(seed % (1 << 64))
    for attempt in range(REDRAWS):
        if attempt >= SHRINK_FROM:
            graph = _shrunk(graph)
        values = tuple(draw_values(x, rng) for x in graph.inputs)
        sample = Sample(graph, values, form, seed)
        with np.errstate(all="ignore"):
            if all(np.all(np.isfinite(np.asarray(v, dtype=np.float64))) for v in evaluate_all(sample)):
                return sample
    return Discard(NOT_FINITE, seed)


def _shrunk(graph: Graph) -> Graph:
    inputs = tuple(Input(x.type, x.layout, x.dynamic, SHRINK.get(x.range, x.range)) for x in graph.inputs)
    return Graph(inputs, graph.nodes, graph.output, graph.extra)


def known_range(name: str) -> bool:
    """A range draw_values knows: a float range of RANGES, an integer or mask range, distinct keys along a dim."""
    return name in RANGES or name in (INDEX, UNIQUE, MASK, ATTN_MASK) or \
        (name.startswith(DISTINCT + "@") and name.split("@")[1].isdigit())


def draw_values(x: Input, rng: np.random.Generator) -> np.ndarray:
    """One input's values: its range's float64 draw; for int64, indices valid for their bound (distinct along their
    unique axis) or small integers; for bool, coin flips (an attention mask keeps a key in every row)."""
    shape, name = x.type.shape, x.range
    if x.type.dtype == INT64:
        if name == UNIQUE and x.type.bound is not None and x.type.unique is not None:
            return _unique_indices(rng, shape, x.type.bound, x.type.unique)
        if name in (INDEX, UNIQUE) and x.type.bound is not None:
            return rng.integers(0, x.type.bound, shape).astype(np.int64)
        return rng.integers(-4, 5, shape).astype(np.int64)
    if x.type.dtype == BOOL:
        mask = rng.random(shape) < 0.5
        if name == ATTN_MASK and mask.ndim:
            keep = rng.integers(0, shape[-1], shape[:-1])  # one key each row keeps: no row all -inf
            np.put_along_axis(mask, keep[..., None], True, axis=-1)
        return mask
    if name.startswith(DISTINCT + "@"):
        return _distinct(rng, shape, int(name.split("@")[1]))
    return np.asarray(RANGES[name].draw(rng, shape), dtype=np.float64)


# values a selection's keys are drawn from: m/8 for 0 < |m| <= 255, exact in bf16 (8 significant bits), fp16 and
# fp32 alike, so comparing them gives one answer at every precision; 510 values cover any dim a graph has (<= 65)
DISTINCT_VALUES = np.array([m / 8.0 for m in range(-255, 256) if m], dtype=np.float64)


def _distinct(rng: np.random.Generator, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """Values distinct along `axis` in every slice (a selection over it has no ties), exact at every precision."""
    moved = (*shape[:axis], *shape[axis + 1:], shape[axis])
    rows = int(np.prod(moved[:-1])) if len(moved) > 1 else 1
    picks = np.stack([rng.choice(DISTINCT_VALUES, moved[-1], replace=False) for _ in range(rows)])
    return np.moveaxis(picks.reshape(moved), -1, axis)


def _unique_indices(rng: np.random.Generator, shape: tuple[int, ...], bound: int, axis: int) -> np.ndarray:
    """Indices in [0, bound), distinct along `axis` in every slice (a scatter's writes never collide)."""
    moved = (*shape[:axis], *shape[axis + 1:], shape[axis])
    rows = int(np.prod(moved[:-1])) if len(moved) > 1 else 1
    picks = np.stack([rng.permutation(bound)[:moved[-1]] for _ in range(rows)])
    return np.moveaxis(picks.reshape(moved), -1, axis).astype(np.int64)


# ---------------------------------------------------------------------------------------------------------------
# one line per sample


def describe(sample: Sample) -> str:
    """One line: the output's expression (values used twice named once), its shape, the layout, dynamic dims, the
    inputs' ranges other than normal."""
    from fpdiff.analysis.fuzz.emit import value_types
    g = sample.graph
    shared = _shared(g)
    lets = [f"v{v}={_expr(g, v, shared, top=True)}" for v in sorted(shared)]
    expr = "; ".join(lets + [", ".join(_expr(g, o, shared, top=True) for o in g.outputs)])
    shape = ", ".join("x".join(map(str, value_types(g)[o].shape)) or "scalar" for o in g.outputs)
    parts = [expr, f"[{shape}]", g.inputs[0].layout if g.inputs else CONTIGUOUS]
    dyn = sorted({d for x in g.inputs for d in x.dynamic})
    if dyn:
        parts.append("dyn:" + ",".join(map(str, dyn)))
    ranges = list(dict.fromkeys(x.range for x in g.inputs if x.range != NORMAL))
    if ranges:
        parts.append(",".join(ranges))
    return " ".join(parts)


def _shared(g: Graph) -> set[int]:
    """Node values (other than the output) that two or more arguments take."""
    n_in, count = len(g.inputs), [0] * (len(g.inputs) + len(g.nodes))
    for n in g.nodes:
        for a in n.args:
            count[a] += 1
    return {v for v in range(n_in, len(count)) if count[v] > 1 and v not in g.outputs}


def _expr(g: Graph, v: int, shared: set[int], top: bool = False) -> str:
    n_in = len(g.inputs)
    if v < n_in:
        return f"x{v}"
    if v in shared and not top:
        return f"v{v}"
    n = g.nodes[v - n_in]
    return f"{n.op}({', '.join(_expr(g, a, shared) for a in n.args)})"
