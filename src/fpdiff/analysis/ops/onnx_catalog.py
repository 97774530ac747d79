"""The ONNX catalog: ONNX's node test cases (onnx.backend.test.case.node), each a one-op graph with its inputs and
the outputs ONNX expects of it.

Names: an op is its node's op_type ("AveragePool"), prefixed by its domain outside the default one
("ai.onnx.ml.Binarizer"). A case is the test's own name ("test_averagepool_2d_pads"). An "_expanded" test (the op's
function body as primitive nodes) counts as a case of the op it expands. Per op the kept cases are, in order: the
first by name, the one with the most input elements, then the rest by name, the expanded ones after the op's own
(they test the primitives); `samples` of them. The test data are fixed, so `seed` changes nothing here."""
from __future__ import annotations

import functools
import re
import warnings
from pathlib import Path

import numpy as np

from fpdiff.analysis.ops.case import ONNX_CATALOG, SAMPLE, Case, OnnxSample, keep_first, matches
from fpdiff.analysis.ops.torch_catalog import slug

# the domain whose ops learn (gradients, optimizers): a sweep of inference backends has nothing to run them on
TRAINING_DOMAIN = "ai.onnx.preview.training"
# ops that draw random numbers: their expected outputs come from a generator no runtime shares
RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial"}
# the dtypes an inputs .npz holds and fpdiff's ONNX loader feeds (bfloat16, float8 and int4 have no numpy dtype)
NPZ_DTYPES = {np.dtype(t) for t in ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                                    "uint16", "uint32", "uint64", "bool")}
_EXPANDED = re.compile(r"_expanded(_ver\d+)?$")
DESCRIPTION_CHARS = 160  # one terminal/JSON line, as the torch catalog's




@functools.lru_cache(maxsize=1)
def _testcases() -> tuple:
    """ONNX's node test cases, generated once per process (they take seconds)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return tuple(sorted(collect_testcases(None), key=lambda t: t.name))


def _node_op(node) -> str:
    return f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


@functools.lru_cache(maxsize=1)
def _ops() -> dict[str, str]:
    """Test name -> op name; an expanded test gets the op of the test it expands."""
    own = {t.name: _node_op(t.model.graph.node[0]) for t in _testcases() if len(t.model.graph.node) == 1}
    out = {}
    for t in _testcases():
        base = _EXPANDED.sub("", t.name)
        op = own.get(t.name) or own.get(base)
        if op:
            out[t.name] = op
    return out


@functools.lru_cache(maxsize=1)
def op_names() -> list[str]:
    """Every op of the catalog, by its name here, sorted."""
    return sorted(set(_ops().values()))


def cases(patterns: list[str] | None, samples: int | None = 2, seed: int = 0) -> tuple[list[Case], list[dict]]:
    """Cases of every op matching `patterns` (None: all), at most `samples` per op (None or < 1: all), and the
    skipped ops with their reason. `seed` is taken for the catalogs' common call and changes nothing here."""
    del seed  # the test data are fixed arrays
    by_op: dict[str, list] = {}
    for t in _testcases():
        op = _ops().get(t.name)
        if op and (patterns is None or matches(op, patterns)):
            by_op.setdefault(op, []).append(t)
    out: list[Case] = []
    skipped: list[dict] = []
    for op in sorted(by_op):
        got, why = _op_cases(op, by_op[op], samples)
        out += got
        if not got:
            skipped.append({"catalog": ONNX_CATALOG, "op": op, "case": "", "reason": why})
    return out, skipped


def _op_cases(op: str, tests: list, samples: int | None) -> tuple[list[Case], str]:
    """This op's cases, or none and the most common reason its tests were left out."""
    return keep_first(_order(tests), lambda t: _case(op, t), samples, "no test cases")


def deeper(case: Case, count: int, seed: int, keep) -> list[Case]:
    """Up to `count` cases of `case`'s op from its other node tests that `keep` (a Case -> bool) accepts, those
    whose float inputs have the most dims first (then the catalog's order). `seed` changes nothing here."""
    del seed  # the test data are fixed arrays
    tests = [t for t in _order([t for t in _testcases() if _ops().get(t.name) == case.op]) if t.name != case.case_id]

    def rank(t) -> int:
        return max((np.ndim(x) for x in t.data_sets[0][0] if x is not None and not isinstance(x, list)), default=-1)
    order = sorted(range(len(tests)), key=lambda i: (-rank(tests[i]), i))

    def probe(i: int) -> Case | str:
        got = _case(case.op, tests[i])
        return got if isinstance(got, str) or keep(got) else "not kept"
    return keep_first(order, probe, count, "")[0]


def _order(tests: list) -> list:
    """The op's tests in the order they are tried: its own tests before expanded ones; among each, the first by
    name, the one with the most input elements, then the rest by name."""
    out = []
    for group in ([t for t in tests if not _EXPANDED.search(t.name)], [t for t in tests if _EXPANDED.search(t.name)]):
        if not group:
            continue
        sizes = [sum(int(np.size(x)) for x in t.data_sets[0][0] if x is not None and not isinstance(x, list))
                 for t in group]
        largest = max(range(len(group)), key=lambda i: (sizes[i], -i))
        head = [0] if largest == 0 else [0, largest]
        out += [group[i] for i in head] + [t for i, t in enumerate(group) if i not in head]
    return out


def _case(op: str, test) -> Case | str:
    """The Case of one node test, or why it is not one."""
    graph = test.model.graph
    if any(n.domain == TRAINING_DOMAIN for n in graph.node):
        return "training-domain op"
    if any(n.op_type in RANDOM_OPS for n in graph.node) or "training_dropout" in test.name and "zero_ratio" not in \
            test.name:  # a dropout mask in training mode is drawn as a random op's output is
        return "random or nondeterministic op"
    kinds = [vi.type.WhichOneof("value") for vi in [*graph.input, *graph.output]]
    if any(k != "tensor_type" for k in kinds):
        return "sequence, optional, map or sparse input or output"
    inputs, outputs = test.data_sets[0]
    arrays = _arrays(list(inputs))
    expected = _arrays(list(outputs))
    if isinstance(arrays, str) or isinstance(expected, str):
        return arrays if isinstance(arrays, str) else expected
    inits = {i.name for i in graph.initializer}
    names = [vi.name for vi in graph.input if vi.name not in inits]
    if len(names) != len(arrays):
        return "test data do not match the graph's inputs"
    if not any(a.dtype.kind == "f" for a in arrays):
        return "no float tensor input (a precision changes nothing)"
    if any(a.size == 0 for a in arrays):
        return "empty tensor input"
    feeds = dict(zip(names, arrays))
    payload = OnnxSample(model=test.model, inputs=feeds, expected=expected)
    return Case(ONNX_CATALOG, op, test.name, SAMPLE, describe(graph.node, feeds), integer_valued(arrays, expected),
                payload)


def _arrays(values: list) -> list[np.ndarray] | str:
    """Test data as numpy arrays of the dtypes an .npz holds, or why they are not."""
    from onnx import TensorProto, numpy_helper
    out = []
    for v in values:
        if v is None or isinstance(v, (list, dict)):
            return "sequence, optional, map or sparse input or output"
        a = numpy_helper.to_array(v) if isinstance(v, TensorProto) else np.asarray(v)
        if a.dtype not in NPZ_DTYPES:
            return f"{a.dtype} data (no numpy dtype an inputs file holds)"
        out.append(a)
    return out


def integer_valued(inputs: list[np.ndarray], outputs: list[np.ndarray]) -> bool:
    """Every float output holds integers while some float input does not (Round, Floor, Sign): judged by flips.
    Outputs of zeros and NaN only hold no rounding step and do not count (the torch catalog's rule)."""
    floats_out = [a for a in outputs if a.dtype.kind == "f"]
    floats_in = [a for a in inputs if a.dtype.kind == "f"]
    telling = any(bool((np.isfinite(a) & (a != 0)).any()) for a in floats_out)
    return telling and all(_integers(a) for a in floats_out) and not all(_integers(a) for a in floats_in)


def _integers(a: np.ndarray) -> bool:
    """Every finite element is an integer (NaN and Inf say nothing either way)."""
    finite = a[np.isfinite(a)]
    return bool((finite == np.round(finite)).all())


def describe(nodes, feeds: dict[str, np.ndarray]) -> str:
    """One line: the op's attributes and the input shapes and dtypes."""
    from onnx import helper
    attrs = []
    for a in nodes[0].attribute if len(nodes) == 1 else []:
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        attrs.append(f"{a.name}={_short(value)}")
    shapes = [f"{n}: {a.dtype}{list(a.shape)}" for n, a in feeds.items()]
    text = ", ".join(attrs + shapes) + ("" if len(nodes) == 1 else f" ({len(nodes)} nodes)")
    return text if len(text) <= DESCRIPTION_CHARS else text[:DESCRIPTION_CHARS - 3] + "..."


def _short(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."  # tensor and graph attributes: a hint, not the value


def write_case(case: Case, folder: Path) -> tuple[str, str]:
    """The case as an .onnx and its inputs .npz in `folder`, as fpdiff.sources.load(onnx, inputs=npz,
    keep_opset=True) takes them (the graph keeps the opset its test was written for)."""
    import onnx
    payload: OnnxSample = case.payload
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = slug(case.case_id if case.variant == SAMPLE else f"{case.case_id}.{case.variant}")
    model_path, npz_path = folder / f"{base}.onnx", folder / f"{base}.npz"
    onnx.save(payload.model, str(model_path))
    np.savez(npz_path, **payload.inputs)
    return str(model_path), str(npz_path)
