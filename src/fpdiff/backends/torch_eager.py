"""PyTorch eager: the reference implementation, and the baseline every other backend is measured against."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from fpdiff.backends.base import TORCH, TORCH_INPUTS, Backend, Prepared, Repro, Task
from fpdiff.core.errors import Unsupported
from fpdiff.core.precision import FP32, Precision, dtype_name
from fpdiff.model.graph import to_device


def precision_context(precision: Precision, device: str, autocast: bool = True) -> contextlib.ExitStack:
    """Autocast for amp-*, and TF32 on or off explicitly (cuDNN convs default to TF32 on CUDA: fp32 must not).
    Autocast's cast cache is off: it keeps every grad-requiring weight's low copy for the whole forward (half the
    fp32 weights beside them, on a real-size model); without it each op casts the weight it reads, the same values
    (a cast is deterministic), and a weight read once per forward, as most are, costs no more."""
    stack = contextlib.ExitStack()
    if device.startswith("cuda"):
        stack.enter_context(_tf32(precision.tf32_matmul))
    if autocast and precision.autocast is not None:
        stack.enter_context(torch.autocast(device_type=device.split(":")[0], dtype=precision.autocast,
                                           cache_enabled=False))
    return stack


@contextlib.contextmanager
def _tf32(on: bool) -> Iterator[None]:
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def computed_dtype(precision: Precision) -> str:
    if precision.autocast is not None:
        return f"mixed ({dtype_name(precision.autocast)} + float32)"
    return "tf32 (float32 storage)" if precision.tf32_matmul else dtype_name(precision.dtype)


def device_runner(fn: Callable[..., Any], precision: Precision, device: str,
                  autocast: bool = True) -> Callable[..., Any]:
    """Move inputs to the device, run under the precision's context, bring outputs back to the CPU."""
    def run(*inputs: torch.Tensor) -> Any:
        with torch.no_grad(), precision_context(precision, device, autocast):
            out = fn(*(t.to(device) for t in inputs))
        return torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, out)
    return run


# The flag that makes a float64 job the judge: every floating op in float64 whatever the model asks
# (model/float64.py). Without it an fp64 cell runs the model as written, its own casts to float32 included.
FLOAT64_JUDGE = "float64-judge"


class TorchBackend(Backend):
    name = "torch"
    shape_variants = False  # eager runs the shapes it is given: every variant would be the same run
    judges = frozenset({TORCH})  # the float64 judge and per-precision baseline of torch models
    judge_flags = (FLOAT64_JUDGE,)

    def prepare_task(self, task: Task) -> Prepared:
        if not task.is_torch:
            raise Unsupported("torch eager runs torch models; this model is ONNX")
        # on the CPU the weights are cast as each op reads them where a cast copy would be large (the same
        # numbers); a device copy is made whole anyway
        module = to_device(task.module(streamed=task.device == "cpu"), task.device)
        watch_blocks(module)
        if task.precision.is_cast and task.precision.dtype == torch.float64:
            return float64_prepared(module, task.device, judge=FLOAT64_JUDGE in task.flags)
        return Prepared(device_runner(module, task.precision, task.device), computed_dtype(task.precision))

    def prepare_module(self, module: Any, device: str, flags: tuple[str, ...] = ()) -> Prepared:
        """Eager needs no compile: the module is called as it is, here (plan's trials)."""
        # fp32 in and out, its casts inside
        return Prepared(device_runner(to_device(module, device), FP32, device))

    def repro(self, r: Repro) -> str | None:
        if r.onnx_segment:
            return None
        return TORCH_INPUTS + """with torch.no_grad():
    outs = program.module()(*xt)
"""


def watch_blocks(module: torch.nn.Module) -> None:
    """Tell a watching parent each block of the model's largest block list done (a decoder's layers): the segments
    of a long cell (core/segments.py). Nothing is hooked when nobody watches."""
    from fpdiff.core import segments
    if not segments.watched():
        return
    lists = [(n, m) for n, m in module.named_modules() if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential))
             and len(m) > 1]
    if not lists:
        return
    name, blocks = max(lists, key=lambda nm: sum(p.numel() for p in nm[1].parameters()))
    for i, block in enumerate(blocks):
        block.register_forward_hook(lambda *_, i=i: segments.segment(i + 1, len(blocks), f"{name}.{i}"))


def float64_prepared(module: torch.nn.Module, device: str, judge: bool) -> Prepared:
    """A float64 run under model/float64.py's mode: the judge promotes every op to float64; the fp64 cell runs the
    model as written and only records its casts. Either way the casts (file:line) become the run's findings, and an
    op with no float64 kernel is fpdiff's decomposition in the judge, torch's declared refusal in the cell."""
    from fpdiff.model.float64 import float64_everywhere

    def run(*inputs: torch.Tensor) -> Any:
        with torch.no_grad(), float64_everywhere(promote=judge) as mode:
            out = module(*(t.to(device) for t in inputs))
        if not prepared.notes:  # the same casts on every repeat: report them once
            prepared.notes.extend(mode.findings())
            asked = sorted({c.asked for c in mode.casts.values()})
            if asked and not judge:
                prepared.computed_dtype = f"float64 with the model's own casts to {', '.join(asked)}"
        return torch.utils._pytree.tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, out)
    prepared = Prepared(run, "float64")  # run() reads it when called: the findings of the first run go into it
    return prepared
