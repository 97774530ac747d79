"""Reduce a failing graph to what the failure needs: delta debugging over its ops, then smaller shapes, simpler
input values, and the variant features (layout, dynamic dims, value range) it can do without. Every step keeps only
candidates the probe confirms (the same verdict on the same backend), within a budget of probe calls, since each is
a backend run of seconds."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from fpdiff.analysis.fuzz.graph import FLOAT, NP_DTYPES, Graph, Input, Sample
from fpdiff.analysis.fuzz.vocab_index import DISTINCT
from fpdiff.analysis.ops.case import CONTIGUOUS
from fpdiff.core.errors import UsageError

CUT = "cut"  # the range of an input that stands for a removed op's output (its float64 values)
# the ranges that are a variant feature (generate.RANGES): magnitudes a backend's precision meets at its limits.
# The others (normal, positive, unit, small-int, cut) are argument domains or plain values, kept as drawn.
MAGNITUDE_RANGES = ("near-max", "large", "tiny")
SIG_DIGITS = 3  # values a reader can type into a repro while keeping the failure's magnitudes
MAX_SMALL_INT = 2048  # integers up to 2**11 are exact in fp16 (11-bit significand): the same numbers at every precision
MIN_DYNAMIC = 2  # torch.export specializes a dim of size 0 or 1: a dynamic dim kept smaller is no longer dynamic


@dataclass
class Minimized:
    """The smallest sample the probe still confirms, how many probe calls it cost, what each accepted reduction did,
    and the variant features that could not be removed without losing the failure."""
    sample: Sample
    probes: int
    steps: list[str] = field(default_factory=list)
    matters: list[str] = field(default_factory=list)


class Prober:
    """The probe behind a cache (by sample id: a candidate met twice costs one run) and a hard call budget."""

    def __init__(self, probe: Callable[[Sample], bool], budget: int):
        self.probe, self.budget, self.calls = probe, budget, 0
        self.cache: dict[str, bool] = {}

    def left(self) -> int:
        return self.budget - self.calls

    def __call__(self, candidate: Sample) -> bool:
        key = candidate.id
        if key not in self.cache:
            if self.calls >= self.budget:
                return False  # unconfirmed: a reduction is kept only on the probe's word
            self.calls += 1
            self.cache[key] = bool(self.probe(candidate))
        return self.cache[key]


# -- graph surgery --------------------------------------------------------------------------------------------------

def cut(sample: Sample, keep: set[int], *, values64: Sequence[np.ndarray] | None = None) -> Sample | None:
    """The sample with only the nodes `keep` (node indices) the last kept node depends on; an argument a removed node
    produced becomes an input holding that value's float64 values (static, in the graph's layout, range "cut").
    None when nothing is kept."""
    from fpdiff.analysis.fuzz.emit import value_types
    g = sample.graph
    keep = {i for i in keep if 0 <= i < len(g.nodes)}
    if not keep:
        return None
    nodes, cuts = _kept_live(g, keep)
    if cuts and values64 is None:
        from fpdiff.analysis.fuzz.emit import values64 as evaluate64
        values64 = evaluate64(sample)
    types = value_types(g) if cuts else []
    layout = g.inputs[0].layout if g.inputs else CONTIGUOUS  # a torch case takes one layout for all its inputs
    # a cut value keeps the graph's dynamic sizes dynamic: a dim of the size a dynamic input dim had is (almost
    # always) that dim carried through, and a failure of the dynamic-shape path must survive the cut
    dyn_sizes = {x.type.shape[d] for x in g.inputs for d in x.dynamic}
    old_ids = sorted({a for i in nodes for a in g.nodes[i].args if a < len(g.inputs)} | cuts)
    new_id = {old: k for k, old in enumerate(old_ids)}
    inputs, values = [], []
    for old in old_ids:
        if old < len(g.inputs):
            inputs.append(g.inputs[old])
            values.append(sample.values[old])
        else:
            t = types[old]
            dims = tuple(d for d, n in enumerate(t.shape) if n in dyn_sizes and n >= MIN_DYNAMIC)
            inputs.append(Input(t, layout, dims, CUT))
            values.append(np.asarray(values64[old]).astype(NP_DTYPES.get(t.dtype, np.float64)))
    for pos, i in enumerate(nodes):
        new_id[g.value_of_node(i)] = len(old_ids) + pos
    new_nodes = tuple(replace(g.nodes[i], args=tuple(new_id[a] for a in g.nodes[i].args)) for i in nodes)
    graph = Graph(tuple(inputs), new_nodes, len(old_ids) + len(nodes) - 1)
    return Sample(graph, tuple(values), sample.form, 0)


def _kept_live(g: Graph, keep: set[int]) -> tuple[list[int], set[int]]:
    """The kept nodes the last kept one depends on (graph order), and the value ids of removed nodes they take."""
    n_in, need, live, cuts = len(g.inputs), {g.value_of_node(max(keep))}, [], set()
    for i in range(max(keep), -1, -1):
        if g.value_of_node(i) not in need:
            continue
        if i in keep:
            live.append(i)
            need.update(g.nodes[i].args)
        else:
            cuts.add(g.value_of_node(i))  # a removed producer: its value becomes an input, its own args are not needed
    return live[::-1], {v for v in cuts if v >= n_in}


def reshape_inputs(sample: Sample, shapes: Sequence[tuple[int, ...]]) -> Sample | None:
    """The sample with inputs of these (no larger) shapes, values cropped to their leading elements; None when an op
    no longer types (vocabulary infer) or a dynamic dim would drop below what export keeps dynamic."""
    from fpdiff.analysis.fuzz.emit import typed
    g = sample.graph
    if len(shapes) != len(g.inputs):
        raise UsageError(f"reshape_inputs: {len(shapes)} shapes for {len(g.inputs)} inputs")
    inputs, values = [], []
    for x, v, shape in zip(g.inputs, sample.values, shapes):
        shape = tuple(int(s) for s in shape)
        if len(shape) != x.type.rank:
            raise UsageError(f"reshape_inputs: rank {len(shape)} for an input of rank {x.type.rank}")
        if any(s < 1 or s > old for s, old in zip(shape, x.type.shape)):
            return None  # values are cropped, never invented
        if any(shape[d] < MIN_DYNAMIC for d in x.dynamic):
            return None
        inputs.append(replace(x, type=replace(x.type, shape=shape)))
        values.append(np.ascontiguousarray(np.asarray(v)[tuple(slice(0, s) for s in shape)]))
    graph = replace(g, inputs=tuple(inputs))
    if typed(graph)[1] is not None:
        return None  # an op whose arguments or attributes no longer fit (the graph typed before: the shapes did it)
    return sample.with_(graph=graph, values=tuple(values))


def with_input(sample: Sample, k: int, value: np.ndarray | None = None, **changes) -> Sample:
    """The sample with input k's values and/or Input fields replaced."""
    g = sample.graph
    inputs = list(g.inputs)
    inputs[k] = replace(inputs[k], **changes)
    values = list(sample.values)
    if value is not None:
        values[k] = value
    return sample.with_(graph=replace(g, inputs=tuple(inputs)), values=tuple(values))


# -- value simplification -------------------------------------------------------------------------------------------

def round_significant(v: np.ndarray, digits: int = SIG_DIGITS) -> np.ndarray:
    """Finite nonzero values rounded to `digits` significant decimal digits (zeros, infs and NaNs kept)."""
    v = np.asarray(v, dtype=np.float64)
    out = v.copy()
    ok = np.isfinite(v) & (v != 0)
    exp = np.floor(np.log10(np.abs(v[ok]))) - (digits - 1)
    scale = np.power(10.0, exp)
    out[ok] = np.round(v[ok] / scale) * scale
    return out


def small_integers(v: np.ndarray) -> np.ndarray | None:
    """Values rounded to integers away from zero where they would become 0 (so a positive, nonzero or [-1, 1] input
    stays one); None when a value is not finite, too large to be exact at every precision, or when all are under 1
    (they would all become +-1: another range, not a simpler one)."""
    v = np.asarray(v, dtype=np.float64)
    if not v.size or not np.all(np.isfinite(v)) or not 1 <= np.max(np.abs(v)) <= MAX_SMALL_INT:
        return None
    ints = np.round(v)
    return np.where((ints == 0) & (v != 0), np.sign(v), ints)


def normal_range(v: np.ndarray) -> np.ndarray | None:
    """Values scaled into [-1, 1] by their largest magnitude (signs and zeros kept, so argument domains hold): the
    same pattern without the range's magnitudes; None when there is nothing to scale."""
    v = np.asarray(v, dtype=np.float64)
    if not np.all(np.isfinite(v)):
        return None
    top = float(np.max(np.abs(v))) if v.size else 0.0
    return v / top if top > 0 else None


# -- the steps ------------------------------------------------------------------------------------------------------

class _Run:
    """One minimization: the current sample, the prober, the reductions accepted and the features found to matter."""

    def __init__(self, sample: Sample, prober: Prober):
        self.sample, self.prober = sample, prober
        self.steps: list[str] = []
        self.matters: list[str] = []
        self._values64: dict[str, list[np.ndarray]] = {}
        prober.cache[sample.id] = True  # the failure is given: the original costs no probe

    def spare(self, reserve: int = 0) -> bool:
        return self.prober.left() > reserve

    def accept(self, candidate: Sample | None, step: str) -> bool:
        if candidate is None or candidate.id == self.sample.id or not self.prober(candidate):
            return False
        self.sample = candidate
        self.steps.append(step)
        return True

    def cut(self, keep: set[int]) -> Sample | None:
        s = self.sample
        if s.id not in self._values64:
            from fpdiff.analysis.fuzz.emit import values64
            self._values64[s.id] = list(values64(s))
        return cut(s, keep, values64=self._values64[s.id])


def minimize(sample: Sample, probe: Callable[[Sample], bool], *, budget: int = 60) -> Minimized:
    """The smallest sample found whose failure the probe still confirms, in at most `budget` probe calls."""
    if budget < 0:
        raise UsageError(f"minimize: budget must be >= 0 (got {budget})")
    prober = Prober(probe, budget)
    run = _Run(sample, prober)
    reduce_ops(run)
    shrink_shapes(run)
    simplify_values(run)
    dynamic = any(x.dynamic for x in run.sample.graph.inputs)
    drop_variants(run)
    if dynamic and not any(x.dynamic for x in run.sample.graph.inputs):
        shrink_shapes(run)  # the dims that were dynamic could not go below 2 before
    return Minimized(run.sample, prober.calls, run.steps, run.matters)


def _live_nodes(g: Graph) -> list[int]:
    live = g.live()
    return [i for i in range(len(g.nodes)) if g.value_of_node(i) in live]


def _op_names(s: Sample) -> str:
    return ", ".join(s.graph.ops())


def reduce_ops(run: _Run) -> None:
    """Step 1: single ops and suffixes first (most findings need one to three ops), then ddmin over the rest."""
    reserve = _feature_count(run.sample)  # probes kept for step 4: the features can only become fewer
    _cheap(run, reserve)
    _ddmin(run, reserve)


def _cheap(run: _Run, reserve: int) -> None:
    items = _live_nodes(run.sample.graph)
    if len(items) < 2:
        return
    for keep in [{i} for i in items] + [set(items[-k:]) for k in range(2, len(items))]:
        if not run.spare(reserve):
            return
        if _accept_cut(run, keep):
            return


def _accept_cut(run: _Run, keep: set[int]) -> bool:
    before, cand = len(run.sample.graph.ops()), run.cut(keep)
    return cand is not None and run.accept(cand, f"ops: {before} -> {len(cand.graph.ops())} ({_op_names(cand)})")


def _ddmin(run: _Run, reserve: int) -> None:
    """Zeller's ddmin: try each of n chunks, then each complement; refine n until chunks are single nodes."""
    n = 2
    while run.spare(reserve):
        items = _live_nodes(run.sample.graph)
        if len(items) < 2:
            return
        n = min(n, len(items))
        chunks = [items[j * len(items) // n:(j + 1) * len(items) // n] for j in range(n)]
        trials = [(set(c), 2) for c in chunks] + [(set(items) - set(c), max(n - 1, 2)) for c in chunks]
        for keep, next_n in trials:
            if not run.spare(reserve):
                return
            if _accept_cut(run, keep):
                n = next_n
                break
        else:
            if n >= len(items):
                return
            n = min(2 * n, len(items))


def shrink_shapes(run: _Run) -> None:
    """Step 2: every dim of one size made smaller at once (broadcast and contracted dims stay tied), then each dim
    on its own where that does not type or leaves several dims of one size; sizes 1, then halves keeping parity,
    then size-1."""
    reserve = _feature_count(run.sample)
    sizes = sorted({s for x in run.sample.graph.inputs for s in x.type.shape if s > 1}, reverse=True)
    for size in sizes:
        typed, end = _shrink(run, size, reserve, lambda k, d, s, c: s == c, "every dim of size {}")
        dims = [(k, d) for k, x in enumerate(run.sample.graph.inputs) for d, s in enumerate(x.type.shape) if s == end]
        if end > 1 and (not typed or len(dims) > 1):
            for k, d in dims:
                if run.spare(reserve):
                    _shrink(run, end, reserve, lambda i, j, s, c, k=k, d=d: (i, j) == (k, d), f"input {k} dim {d} {{}}")
    left = {s for x in run.sample.graph.inputs for s in x.type.shape}
    run.matters[:] = [m for m in run.matters if not m.startswith("odd-size ") or int(m.split()[1]) in left]


def _shrink(run: _Run, size: int, reserve: int, which: Callable[[int, int, int, int], bool],
            label: str) -> tuple[bool, int]:
    """Smaller sizes for the dims `which` picks (input, dim, size, current size) until none is confirmed: whether
    some candidate typed, and the size reached."""
    typed, cur = False, size
    while cur > 1 and run.spare(reserve):
        refused = set()
        for t in _smaller(cur):
            cand = reshape_inputs(run.sample, _sized(run.sample, lambda k, d, s, c=cur: which(k, d, s, c), t))
            if cand is None:
                continue
            typed = True
            if run.accept(cand, f"shape: {label.format(cur)} -> {t}"):
                cur = t
                break
            if run.prober.cache.get(cand.id) is False:
                refused.add(t)
        else:
            if cur % 2 and cur - 1 in refused and f"odd-size {cur}" not in run.matters:
                run.matters.append(f"odd-size {cur}")  # its even neighbour lost the failure: the odd size matters
            break
    return typed, cur


def _smaller(size: int) -> list[int]:
    """Smaller sizes to try, smallest first: 1, half, the half of the same parity (a vector tail needs an odd size),
    size - 1 (whether the parity matters)."""
    half = size // 2
    same = half + 1 if (half - size) % 2 else half
    return [t for t in dict.fromkeys([1, half, same, size - 1]) if 1 <= t < size]


def _sized(s: Sample, which: Callable[[int, int, int], bool], t: int) -> list[tuple[int, ...]]:
    """Every input's shape with the dims `which` picks (input, dim, size) set to t."""
    return [tuple(t if which(k, d, n) else n for d, n in enumerate(x.type.shape))
            for k, x in enumerate(s.graph.inputs)]


def simplify_values(run: _Run) -> None:
    """Step 3: float inputs' values to 3 significant digits, then to small integers, all inputs at once first."""
    # a selection's distinct keys keep their values: rounded, they could tie, and a tie's order is no bug
    floats = [k for k, x in enumerate(run.sample.graph.inputs) if x.type.dtype == FLOAT
              and not x.range.startswith(DISTINCT)]
    for name, fn in (("3 significant digits", round_significant), ("small integers", small_integers)):
        reserve = _feature_count(run.sample)
        if len(floats) > 1 and run.spare(reserve) and run.accept(
                _map_values(run.sample, floats, fn), f"values: every input to {name}"):
            continue
        for k in floats:
            if run.spare(reserve):
                run.accept(_map_values(run.sample, [k], fn), f"values: input {k} to {name}")


def _map_values(s: Sample, ks: list[int], fn: Callable[[np.ndarray], np.ndarray | None]) -> Sample | None:
    values = list(s.values)
    for k in ks:
        new = fn(values[k])
        if new is not None:
            values[k] = new
    return s.with_(values=tuple(values)) if any(v is not w for v, w in zip(values, s.values)) else None


def _features(s: Sample) -> list[tuple[int | None, str, str]]:
    """The variant features: the graph's layout and dynamic dims (one each for all inputs: a torch case takes one
    layout, and broadcast partners vary together), and each input's magnitude range."""
    inputs = s.graph.inputs
    out: list[tuple[int | None, str, str]] = []
    if inputs and inputs[0].layout != CONTIGUOUS:
        out.append((None, "layout", inputs[0].layout))
    if any(x.dynamic for x in inputs):
        out.append((None, "dynamic", "dynamic"))
    out += [(k, "range", x.range) for k, x in enumerate(inputs)
            if x.range in MAGNITUDE_RANGES and x.type.dtype == FLOAT]
    return out


def _feature_count(s: Sample) -> int:
    return len(_features(s))


def drop_variants(run: _Run) -> None:
    """Step 4: the layout made contiguous, dynamic dims static, each magnitude range brought to [-1, 1]; the features
    whose removal loses the failure are what matters."""
    for k, what, value in _features(run.sample):
        cand = _without(run.sample, k, what)
        where = "" if k is None else f"input {k} "
        if cand is None or run.accept(cand, f"variant: {where}{value} removed"):
            continue
        if run.prober.cache.get(cand.id) is False and value not in run.matters:
            run.matters.append(value)  # refused by the probe, not merely untried for want of budget


def _without(s: Sample, k: int | None, what: str) -> Sample | None:
    g = s.graph
    if what == "layout":
        return s.with_(graph=replace(g, inputs=tuple(replace(x, layout=CONTIGUOUS) for x in g.inputs)))
    if what == "dynamic":
        return s.with_(graph=replace(g, inputs=tuple(replace(x, dynamic=()) for x in g.inputs)))
    scaled = normal_range(s.values[k])
    return None if scaled is None else with_input(s, k, scaled, range="normal")
