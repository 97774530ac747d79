"""The one count of what a torch program computes in, for every backend that runs torch programs (ExecuTorch's lowered
programs, a delegate's original graph): float arithmetic ops by dtype, data movement left out, so the dtype-changed
rule (core/dtypes.py) reads every backend's count the same way."""
from __future__ import annotations

import re
from collections import Counter
from typing import Any

# torch ops that only move, view or name values: left out when counting what computes in which dtype (a copy in
# fp16 rounds nothing)
MOVES = {"view", "view_copy", "_unsafe_view", "clone", "permute", "permute_copy", "transpose", "transpose_copy",
         "expand", "expand_copy", "squeeze", "squeeze_copy", "unsqueeze", "unsqueeze_copy", "reshape", "slice",
         "slice_copy", "select", "select_copy", "cat", "stack", "split", "split_copy", "split_with_sizes_copy",
         "getitem", "_to_copy", "alias", "alias_copy", "detach", "full", "full_like", "zeros", "ones", "arange",
         "index", "gather", "embedding", "t", "t_copy", "contiguous", "constant_pad_nd", "flatten", "empty",
         "_assert_tensor_metadata", "scalar_tensor", "sym_size", "_to_dim_order_copy", "_clone_dim_order"}


def op_name(node: Any) -> str:
    """An FX node's op without namespace or overload: aten.convolution.default -> convolution."""
    named = getattr(node.target, "name", None)  # OpOverload and EdgeOpOverload: "aten::convolution"
    if callable(named):
        return str(named()).split("::")[-1].split(".")[0]
    return getattr(node.target, "__name__", str(node.target)).split(".")[0]


def float_dtype(node: Any) -> str | None:
    """The float dtype an FX node computes in, from its output's fake tensor."""
    val = node.meta.get("val")
    val = val[0] if isinstance(val, (list, tuple)) and val else val
    dtype = getattr(val, "dtype", None)
    return str(dtype).removeprefix("torch.") if dtype is not None and dtype.is_floating_point else None


def count_op_dtypes(graph: Any) -> Counter[str]:
    """Float arithmetic ops of a torch FX graph by the dtype they compute in (data movement left out): the one
    count for backends that run torch programs."""
    counts: Counter[str] = Counter()
    for n in graph.nodes:
        if n.op == "call_function" and op_name(n) not in MOVES:
            dtype = float_dtype(n)
            if dtype:
                counts[dtype] += 1
    return counts


# How the torch-program converters say they have nothing for an op of the model: ExecuTorch's edge dialect
# ("Operator torch._ops.aten.histc.default is not in Core ATen opset") and litert-torch ("Lowering not found:
# aten.histc.default"). Either is the converter refusing an op the model contains: `unsupported`, naming it.
_REFUSED_OP = re.compile(r"Operator (?:torch\._ops\.)?(?P<a>[\w.]+) is not in Core ATen opset|"
                         r"Lowering not found: (?P<b>[\w.]+)")


def refused_op(text: str) -> str | None:
    """The op a converter's message says it has no lowering for (aten.histc.default), else None."""
    m = _REFUSED_OP.search(text)
    return (m.group("a") or m.group("b")) if m else None


# the compute ops a quantized program means to run in integers: one whose operands each come from a dequantize op
# (through data movement) is quantized; one that does not is left float (a layer the quantizer skipped, or one the
# lowering kept in float)
COMPUTE = frozenset({"convolution", "conv1d", "conv2d", "conv3d", "conv_transpose2d", "linear", "mm", "bmm", "addmm",
                     "matmul"})
DEQUANTIZE = frozenset({"dequantize_per_tensor", "dequantize_per_channel", "dequantize_per_channel_group",
                        "dequantize_affine"})


def integer_placement(graphs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Which compute ops of a quantized program's graphs, by where they run, take dequantized operands (the
    backend's integer kernel) and which stayed float: a quantized cell's integer_ops, float_ops and left_float."""
    ints: Counter[str] = Counter()
    left: list[str] = []
    for where, graph in graphs:
        for n in graph.nodes:
            if n.op != "call_function" or op_name(n) not in COMPUTE:
                continue
            operands = [a for a in n.args[:2] if hasattr(a, "op")]
            if operands and all(_dequantized(a) for a in operands):
                ints[f"{op_name(n)} ({where})"] += 1
            else:
                left.append(f"{op_name(n)} {n.name} ({where})")
    return {"integer_ops": dict(ints), "float_ops": len(left), "left_float": left[:32]}


def _dequantized(node: Any) -> bool:
    """Whether a value comes from a dequantize op, through data movement only."""
    while node.op == "call_function" and op_name(node) in MOVES and node.args and hasattr(node.args[0], "op"):
        node = node.args[0]
    return node.op == "call_function" and op_name(node) in DEQUANTIZE
