"""A fuzz graph written out: computed in process (the float64 value of every value id, for the oracle and the
minimizer), as a torch spec file (the ops catalog's one-op model, whose op interprets the graph: every backend's
route takes it, with the layouts and dynamic dims the ops sweep gives a case) and as an ONNX model with its inputs."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from fpdiff.analysis.fuzz.graph import BOOL, FLOAT, INT64, NP_DTYPES, QUANTIZE, Graph, Sample, TensorType
from fpdiff.analysis.fuzz.vocab import VOCAB
from fpdiff.analysis.ops.case import CONTIGUOUS, SAMPLE, TORCH_CATALOG, Case, TorchSample
from fpdiff.analysis.ops.torch_catalog import write_case
from fpdiff.core.errors import UsageError
from fpdiff.sources.opset import TARGET_OPSET

# The ONNX form's opset: the one fpdiff's sources bring every ONNX graph to, which ONNX Runtime 1.32, OpenVINO and
# IREE's importer read; it has Gelu (opset 20) and LayerNormalization (17) as single ops, and the reductions' axes
# as an input (18).
OPSET = TARGET_OPSET
IR_VERSION = 10  # the IR that opset 21 came with (onnx 1.16): older runtimes refuse a newer IR
RUN_GRAPH = "fpdiff.analysis.fuzz.emit.run_graph"  # the dotted callable a torch spec's one-op model calls
OUTPUT = "output"  # the ONNX graph's output name


# ---------------------------------------------------------------------------------------------------------------
# types and in-process evaluation


def value_types(graph: Graph) -> list[TensorType]:
    """The type of every value id (inputs, then node outputs), each node typed by its op's infer; a graph that does
    not type is a usage error (a graph the user gave)."""
    types, problem = typed(graph)
    if problem:
        raise UsageError(problem)
    return types


def typed(graph: Graph) -> tuple[list[TensorType], str | None]:
    """The types of the values as far as they go, and why the graph does not type (None: it does)."""
    types = [x.type for x in graph.inputs]
    for i, node in enumerate(graph.nodes):
        op = VOCAB.get(node.op)
        if op is None:
            return types, f"graph node {i} names {node.op!r}, which is not in the fuzz vocabulary"
        if len(node.args) != op.arity or any(not 0 <= a < len(types) for a in node.args):
            return types, (f"graph node {i} ({node.op}) takes value ids {list(node.args)}; it takes {op.arity} "
                           f"of the {len(types)} values before it")
        try:
            types.append(op.infer([types[a] for a in node.args], node.attr))
        except (ValueError, KeyError, TypeError) as e:
            return types, f"graph node {i} ({node.op}) does not fit its arguments: {e}"
    bad = [o for o in graph.outputs if not 0 <= o < len(types)]
    if bad:
        return types, f"graph output {bad[0]} is not a value id (the graph has {len(types)})"
    return types, None


def interpret(graph: Graph, tensors: tuple, upto: int | None = None) -> list:
    """Every value of the graph up to value id `upto` (all: None) from its input tensors, by the ops' torch forms."""
    values = list(tensors)
    last = len(graph.inputs) + len(graph.nodes) - 1 if upto is None else upto
    for node in graph.nodes:
        if len(values) > last:
            break
        values.append(VOCAB[node.op].torch(*[values[a] for a in node.args], **node.attr))
    return values


_PARSED: dict[str, Graph] = {}  # graph JSON -> Graph: a plain dict, which torch.compile traces without a warning


def _parsed(text: str) -> Graph:
    """A graph's JSON text as a Graph, parsed once per process (an eager model calls run_graph on every run)."""
    g = _PARSED.get(text)
    if g is None:
        g = _PARSED[text] = Graph.from_dict(json.loads(text))
    return g


def run_graph(*tensors, graph: str):
    """The graph's output from its input tensors: the op a fuzz sample's torch spec file calls."""
    g = _parsed(graph)
    values = interpret(g, tensors, max(g.outputs))
    return values[g.output] if not g.extra else tuple(values[o] for o in g.outputs)


def _tensors(sample: Sample, dtype) -> tuple:
    import torch
    return tuple(torch.from_numpy(np.array(v, dtype=np.float64)).to(dtype) if x.type.dtype == FLOAT
                 else torch.from_numpy(np.array(v)) for x, v in zip(sample.graph.inputs, sample.values))


def _numpy(t) -> np.ndarray:
    import torch
    t = t.detach()
    return (t.to(torch.float64) if t.dtype == torch.bfloat16 else t).contiguous().numpy()


def evaluate(sample: Sample, dtype=None) -> np.ndarray:
    """The graph's (first) output computed here by the ops' torch forms at `dtype` (torch.float64 by default)."""
    return evaluate_all(sample, dtype)[0]


def evaluate_all(sample: Sample, dtype=None) -> list[np.ndarray]:
    """Every output of the graph, in order, computed here at `dtype` (torch.float64 by default)."""
    import torch
    with torch.no_grad():
        g = sample.graph
        values = interpret(g, _tensors(sample, dtype or torch.float64), max(g.outputs))
        return [_numpy(values[o]) for o in g.outputs]


def values64(sample: Sample) -> list[np.ndarray]:
    """The float64 value of every value id, inputs then node outputs (where the minimizer cuts a graph)."""
    import torch
    with torch.no_grad():
        return [_numpy(t) for t in interpret(sample.graph, _tensors(sample, torch.float64))]


# integer-valued outputs stay integer-valued through these ops (they move, select or negate values)
_KEEPS_INTEGERS = {"transpose", "permute", "reshape", "flatten", "slice", "expand", "concat", "pad_reflect",
                   "neg", "abs", "relu", "maximum", "minimum", "amax", "max_pool2d", "sign", "round", "floor"}


def integer_valued(graph: Graph) -> bool:
    """Whether the graph's output holds integers by construction (an integer-valued op, then only ops that move
    values): judged by flips, as ops judges round and floor."""
    n_in, whole = len(graph.inputs), [False] * len(graph.inputs)
    for node in graph.nodes:
        op = VOCAB[node.op]
        whole.append(op.integer_valued or (node.op in _KEEPS_INTEGERS and all(whole[a] for a in node.args)))
    return all(o >= n_in and whole[o] for o in graph.outputs)


# ---------------------------------------------------------------------------------------------------------------
# the torch form


def layout_of(graph: Graph) -> str:
    """The graph's one input layout (the generator draws one per graph)."""
    layouts = {x.layout for x in graph.inputs}
    if len(layouts) > 1:
        raise UsageError(f"graph inputs have different layouts {sorted(layouts)}; a torch case takes one")
    return layouts.pop() if layouts else CONTIGUOUS


def describe(graph: Graph) -> str:
    """One line: the live ops in order and the input shapes."""
    shapes = ", ".join(f"{list(x.type.shape)}" for x in graph.inputs)
    return f"{' > '.join(graph.ops()) or 'identity'} on {shapes}"[:160]


def torch_case(sample: Sample) -> Case:
    """The sample as an ops Case: the ops catalog's one-op model whose op is run_graph on this graph's JSON."""
    import torch
    g = sample.graph
    value_types(g)  # a graph that does not type is a usage error here, not a traceback in a worker
    payload = TorchSample(fn=RUN_GRAPH, args=_tensors(sample, torch.float64),
                          kwargs={"graph": json.dumps(g.as_dict(), sort_keys=True)}, layout=layout_of(g),
                          dynamic=tuple(tuple(x.dynamic) for x in g.inputs), params=held_as_weights(sample))
    return Case(TORCH_CATALOG, "fuzz:" + "+".join(g.ops()), sample.id, SAMPLE, describe(g), integer_valued(g),
                payload)


def held_as_weights(sample: Sample) -> tuple[int, ...]:
    """The inputs a quantize graph holds as the program's parameters: every float input but the first, as the op
    sweep's quantize variant holds a layer's weights (a quantizer quantizes a weight per channel, ahead of time, and
    an activation per tensor from calibration); none in the other forms."""
    if sample.form != QUANTIZE:
        return ()
    return tuple(k for k, x in enumerate(sample.graph.inputs) if x.type.dtype == FLOAT)[1:]


def write_torch(sample: Sample, folder: str | Path) -> str:
    """The sample as a spec .py (and its .pt) in `folder`, as fpdiff.sources.load takes it; layout, dynamic dims
    and the fingerprint as the ops sweep gives a case."""
    return write_case(torch_case(sample), Path(folder))[0]


def input_names(graph: Graph) -> list[str]:
    """The inputs' names in the torch program (the ONNX form uses the same): input, arg1, arg2, ..."""
    return ["input"] + [f"arg{i}" for i in range(1, len(graph.inputs))]


# ---------------------------------------------------------------------------------------------------------------
# the ONNX form


class OnnxBuilder:
    """Collects the nodes and constants of one ONNX graph; float constants take the graph's float type."""

    def __init__(self, float_type: int | None = None) -> None:
        from onnx import TensorProto
        self.float_type = TensorProto.DOUBLE if float_type is None else float_type
        self.nodes: list = []
        self.initializers: list = []
        self.ranks: dict[str, int] = {}
        self._count = 0

    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def node(self, op_type: str, inputs: list[str], attrs: dict | None = None) -> str:
        """Adds one node; its (single) output's name."""
        from onnx import helper
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=self.fresh("n_" + op_type),
                                           **(attrs or {})))
        return out

    def node_outputs(self, op_type: str, inputs: list[str], n: int, attrs: dict | None = None) -> list[str]:
        """Adds one node of n outputs (TopK's values and indices); their names."""
        from onnx import helper
        outs = [self.fresh(op_type.lower()) for _ in range(n)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.fresh("n_" + op_type),
                                           **(attrs or {})))
        return outs

    def const(self, array: Any) -> str:
        """An initializer: float arrays in the graph's float type, integer arrays as int64."""
        from onnx import helper, numpy_helper
        a = np.asarray(array)
        if a.dtype.kind == "f":
            a = a.astype(helper.tensor_dtype_to_np_dtype(self.float_type))
        elif a.dtype.kind in "iu":
            a = a.astype(np.int64)
        name = self.fresh("const")
        self.initializers.append(numpy_helper.from_array(a, name))
        return name

    def rank(self, name: str) -> int:
        """The rank of a graph value (an input or an op's output)."""
        return self.ranks[name]


def to_onnx(sample: Sample, float_type: int | None = None):
    """The sample's graph as an ONNX ModelProto at OPSET, inputs named and dynamic dims as dim_params, its floats
    float64 (`float_type`: another ONNX element type, float32 for a graph a quantizer takes). An input's layout has no
    meaning in ONNX (a graph's inputs are dense arrays), so it is left out."""
    from onnx import helper
    g = sample.graph
    types = value_types(g)
    names = input_names(g)
    b = OnnxBuilder(float_type)
    value_names = list(names)
    for name, t in zip(names, types):
        b.ranks[name] = t.rank
    for i, node in enumerate(g.nodes):
        out = VOCAB[node.op].onnx(b, [value_names[a] for a in node.args], node.attr)
        b.ranks[out] = types[len(names) + i].rank
        value_names.append(out)
    outs = [_named_output(b, value_names[o], OUTPUT if k == 0 else f"{OUTPUT}_{k}", k == 0 and o >= len(names))
            for k, o in enumerate(g.outputs)]
    dynamic = any(x.dynamic for x in g.inputs)
    inputs = [helper.make_tensor_value_info(n, _onnx_type(x.type.dtype, b.float_type),
                                            [f"{n}_d{d}" if d in x.dynamic else s for d, s in enumerate(x.type.shape)])
              for n, x in zip(names, g.inputs)]
    output = [helper.make_tensor_value_info(name, _onnx_type(types[o].dtype, b.float_type),
                                            [None] * types[o].rank if dynamic else list(types[o].shape))
              for name, o in zip(outs, g.outputs)]
    graph = helper.make_graph(b.nodes, f"fuzz_{sample.id}", inputs, output, initializer=b.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                             producer_name="fpdiff fuzz")


def _named_output(b: OnnxBuilder, value: str, name: str, rename: bool) -> str:
    """A graph output named `name`: the last node's output renamed where it is that value (the graph ends in its own
    op, as a fuser sees it), else an Identity of the value (an input, an earlier value, another output)."""
    from onnx import helper
    last = b.nodes[-1] if b.nodes else None
    if rename and last is not None and list(last.output) == [value]:
        last.output[0] = name
    else:
        b.nodes.append(helper.make_node("Identity", [value], [name], name=b.fresh("n_Identity")))
    return name


def _onnx_type(dtype: str, float_type: int) -> int:
    from onnx import TensorProto
    return {INT64: TensorProto.INT64, BOOL: TensorProto.BOOL}.get(dtype, float_type)


def write_onnx(sample: Sample, folder: str | Path) -> tuple[str, str]:
    """(model.onnx, inputs.npz) of the sample in `folder`, as fpdiff.sources.load(model, inputs=npz,
    keep_opset=True) takes them; the model passes onnx.checker's full check."""
    import onnx
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = to_onnx(sample)
    onnx.checker.check_model(model, full_check=True)
    model_path, npz_path = folder / f"{sample.id}.onnx", folder / f"{sample.id}.npz"
    onnx.save(model, str(model_path))
    names = input_names(sample.graph)
    np.savez(npz_path, **{n: np.asarray(v, dtype=NP_DTYPES[x.type.dtype])
                          for n, x, v in zip(names, sample.graph.inputs, sample.values)})
    return str(model_path), str(npz_path)
