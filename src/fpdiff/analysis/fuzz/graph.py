"""A fuzz graph as plain data: typed inputs, op nodes over value ids, one output, and the input values it is tested
with. Plain (hashable, JSON) so that a graph has a stable id, can be written as a torch program or an ONNX graph,
cut and shrunk by the minimizer, and shipped to another host."""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fpdiff.analysis.ops.case import CHANNELS_LAST, CONTIGUOUS, TRANSPOSED

FLOAT, INT64, BOOL = "float", "int64", "bool"  # FLOAT: the precision under test's float (float64 for the judge)
DTYPES = (FLOAT, INT64, BOOL)
NP_DTYPES = {FLOAT: np.float64, INT64: np.int64, BOOL: np.bool_}  # a value's float64-judge array type
LAYOUTS = (CONTIGUOUS, CHANNELS_LAST, TRANSPOSED)
TORCH, ONNX = "torch", "onnx"  # the forms a graph is written in: a torch program (every backend's route), an ONNX graph
FORMS = (TORCH, ONNX)  # the forms a campaign writes unless told
# the ONNX graph quantized as ONNX Runtime's users quantize a model (QDQ, calibrated on the graph's own inputs) and
# judged against its exact emulation at its own format (analysis/ops/quantized.py): asked for by name
QDQ = "qdq"
# the torch program quantized by each backend's own quantizer at static int8 (PT2E's on ExecuTorch, inductor and
# LiteRT; ONNX Runtime's and NNCF's on the exported graph), calibrated on inputs drawn like the graph's and judged
# by quant's three readings (analysis/ops/quantized.py, the op sweep's `quantize` variant): asked for by name
QUANTIZE = "quantize"
ALL_FORMS = (*FORMS, QDQ, QUANTIZE)
QUANTIZED_FORMS = (QDQ, QUANTIZE)  # the forms judged against a quantized graph's emulation


def written_as(form: str) -> str:
    """The form whose ops and writer a graph of `form` uses: a QDQ graph is an ONNX graph, quantized; a quantize
    graph is a torch program each backend quantizes."""
    return {QDQ: ONNX, QUANTIZE: TORCH}.get(form, form)


@dataclass(frozen=True)
class TensorType:
    """A value's shape and dtype; for an INT64 value, what is known of its entries: `bound` (every entry in
    [0, bound): a valid index into a dim of that size) and `unique` (the axis along which each slice's entries are
    distinct: what scatter and index_put need to be deterministic)."""
    shape: tuple[int, ...]
    dtype: str = FLOAT
    bound: int | None = None
    unique: int | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Input:
    """A graph input: its type, how it reaches the first op (memory layout), which dims are exported as dynamic, and
    the range its values were drawn from (generate.RANGES: what the minimizer may simplify)."""
    type: TensorType
    layout: str = CONTIGUOUS
    dynamic: tuple[int, ...] = ()
    range: str = "normal"


@dataclass(frozen=True)
class Node:
    """One op: a vocabulary name (vocab.VOCAB), the value ids it takes, its attributes as sorted (name, value) pairs
    of JSON values (lists as tuples)."""
    op: str
    args: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...] = ()

    @property
    def attr(self) -> dict:
        return dict(self.attrs)


def attrs_of(d: dict) -> tuple[tuple[str, Any], ...]:
    """A dict of attributes as a Node keeps them: sorted, lists as tuples (hashable)."""
    return tuple(sorted((k, _frozen(v)) for k, v in d.items()))


def _frozen(v: Any) -> Any:
    return tuple(_frozen(x) for x in v) if isinstance(v, (list, tuple)) else v


@dataclass(frozen=True)
class Graph:
    """Value ids: 0 .. len(inputs)-1 are the inputs, len(inputs) + i is node i's output. Nodes are in topological
    order (a node takes only ids below its own). `output` is the id the graph returns, `extra` the ids it returns
    after it (a graph of several outputs)."""
    inputs: tuple[Input, ...]
    nodes: tuple[Node, ...]
    output: int
    extra: tuple[int, ...] = ()  # further outputs (a model returning logits and a hidden state): judged together

    @property
    def outputs(self) -> tuple[int, ...]:
        return (self.output, *self.extra)

    def value_of_node(self, i: int) -> int:
        return len(self.inputs) + i

    def ops(self) -> list[str]:
        """The op names of the nodes the output depends on, in graph order."""
        live = self.live()
        return [n.op for i, n in enumerate(self.nodes) if self.value_of_node(i) in live]

    def live(self) -> set[int]:
        """The value ids the output depends on (itself included)."""
        need, n_in = set(self.outputs), len(self.inputs)
        for i in range(len(self.nodes) - 1, -1, -1):
            if n_in + i in need:
                need.update(self.nodes[i].args)
        return need

    def as_dict(self) -> dict:
        return {"inputs": [_input_dict(x) for x in self.inputs],
                "nodes": [{"op": n.op, "args": list(n.args), "attrs": {k: _jsonable(v) for k, v in n.attrs}}
                          for n in self.nodes],
                "output": self.output, **({"extra": list(self.extra)} if self.extra else {})}

    @classmethod
    def from_dict(cls, d: dict) -> Graph:
        inputs = tuple(Input(TensorType(tuple(x["shape"]), x.get("dtype", FLOAT), x.get("bound"), x.get("unique")),
                             x.get("layout", CONTIGUOUS), tuple(x.get("dynamic", ())), x.get("range", "normal"))
                       for x in d["inputs"])
        nodes = tuple(Node(n["op"], tuple(n["args"]), attrs_of(n.get("attrs", {}))) for n in d["nodes"])
        return cls(inputs, nodes, int(d["output"]), tuple(int(v) for v in d.get("extra", ())))


def _input_dict(x: Input) -> dict:
    """An input as JSON; an integer's bound and unique axis only when known (older graphs read the same)."""
    d = {"shape": list(x.type.shape), "dtype": x.type.dtype, "layout": x.layout, "dynamic": list(x.dynamic),
         "range": x.range}
    d.update({k: v for k, v in (("bound", x.type.bound), ("unique", x.type.unique)) if v is not None})
    return d


def _jsonable(v: Any) -> Any:
    return [_jsonable(x) for x in v] if isinstance(v, tuple) else v


@dataclass(frozen=True)
class Sample:
    """A graph with the values it is tested with (float64 for FLOAT inputs, one array per input) and the form it is
    written in. Its id is stable: the same graph, values and form give the same id on every host."""
    graph: Graph
    values: tuple[np.ndarray, ...] = field(compare=False, hash=False)
    form: str = TORCH
    seed: int = 0  # the generator's seed for this graph (0 for a graph made otherwise, e.g. by the minimizer)

    @property
    def id(self) -> str:
        h = hashlib.sha256(json.dumps({"graph": self.graph.as_dict(), "form": self.form}, sort_keys=True).encode())
        for v in self.values:
            a = np.ascontiguousarray(v)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        return "g" + h.hexdigest()[:12]

    def with_(self, **changes) -> Sample:
        return replace(self, **changes)

    def to_bytes(self) -> bytes:
        """The sample as one .npz blob (graph JSON + values), what a finding keeps and a repro loads."""
        buf = io.BytesIO()
        np.savez(buf, __graph__=np.frombuffer(json.dumps(
            {"graph": self.graph.as_dict(), "form": self.form, "seed": self.seed}).encode(), dtype=np.uint8),
                 **{f"v{i}": v for i, v in enumerate(self.values)})
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes) -> Sample:
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            meta = json.loads(z["__graph__"].tobytes().decode())
            graph = Graph.from_dict(meta["graph"])
            values = tuple(z[f"v{i}"] for i in range(len(graph.inputs)))
        return cls(graph, values, meta.get("form", TORCH), int(meta.get("seed", 0)))
