"""Whether a torch model's inputs fit it, asked before any worker starts: inputs of the wrong shape are the user's
input error (one line, exit 2, naming the layer that refused and what it takes), not a failed float64 reference.
The model runs first on fake tensors (shapes only, no arithmetic: milliseconds even for a large model); only a
shape error there is confirmed by a real run, so a model that fake tensors cannot trace (data-dependent code) costs
nothing and is never refused here."""
from __future__ import annotations

import logging
import re

import torch

from fpdiff.core.errors import UsageError
from fpdiff.sources.spec import held

# What torch says when a tensor's shape does not fit an op (matmul, broadcasting, conv channels, view, cat, norm
# shapes, embedding indices). Only these are the inputs' fault; any other error is left to the float64 reference.
SHAPE_ERROR = re.compile(
    r"shapes cannot be multiplied|size of tensor a \(\d+\) must match the size of tensor b|"
    r"expected input\[.*\] to have \d+ channels|to have \d+ channels, but got|is invalid for input of size|"
    r"Expected \d+D .*input|expected \d+D .*input|Sizes of tensors must match|normalized_shape|"
    r"index out of range in self|Dimension out of range|size mismatch|cannot be broadcast|shape mismatch",
    re.IGNORECASE)
# On fake tensors torch's shape checks speak otherwise ("a and b must have same reduction dim"): any error that
# names a shape, size, dim or channel is confirmed by the real run, which alone decides (SHAPE_ERROR)
FAKE_SHAPE_ERROR = re.compile(r"shape|size|dim|channel", re.IGNORECASE)


def check_fit(module: object, inputs: tuple, names: list[str]) -> None:
    """Raise UsageError when `inputs` do not fit `module` by shape; return quietly otherwise or when unsure."""
    if not isinstance(module, torch.nn.Module) or not all(isinstance(t, torch.Tensor) for t in inputs):
        return
    if _refusal(module, inputs, fake=True) is None:
        return
    refused = _refusal(module, inputs, fake=False)  # confirmed by the real model, on this error path only
    if refused is None:
        return
    where, why = refused
    given = ", ".join(f"{n} {list(t.shape)} {str(t.dtype).removeprefix('torch.')}" for n, t in zip(names, inputs))
    raise UsageError(f"the inputs do not fit the model: {where} raised {why.splitlines()[0]}; inputs given: {given}")


def _refusal(module: torch.nn.Module, inputs: tuple, fake: bool) -> tuple[str, str] | None:
    """(the layer that refused and what it takes, torch's message) when a shape error stops the model, else None."""
    stack: list[tuple[str, torch.nn.Module]] = []
    names = {m: n for n, m in module.named_modules()}

    def enter(m: torch.nn.Module, _args) -> None:
        stack.append((names.get(m, ""), m))

    def leave(m: torch.nn.Module, _args, _out) -> None:
        stack.pop()

    hooks = [h for m in module.modules() for h in (m.register_forward_pre_hook(enter),
                                                    m.register_forward_hook(leave))]
    try:
        _run(module, inputs, fake)
    except Exception as e:  # noqa: BLE001 - any failure but a shape error is not this check's to judge
        if not (FAKE_SHAPE_ERROR if fake else SHAPE_ERROR).search(str(e)):
            return None
        name, m = stack[-1] if stack else ("", module)  # a forward that raised never left: the innermost is last
        return _layer(name, m), f"{type(e).__name__}: {e}"
    finally:
        for h in hooks:
            h.remove()
    return None


def _run(module: torch.nn.Module, inputs: tuple, fake: bool) -> None:
    """The model's forward on the inputs: on fake tensors (shapes only) or for real, without gradients."""
    with torch.no_grad():
        if not fake:
            module(*inputs)
            return
        from torch._subclasses.fake_tensor import FakeTensorMode
        # fake tensors log a meta kernel's failure with its trace: the failure is this check's to read, not to print
        with held(("torch._subclasses.fake_tensor",), logging.CRITICAL), \
                FakeTensorMode(allow_non_fake_inputs=True) as mode:
            module(*[mode.from_tensor(t) for t in inputs])


def _layer(name: str, m: torch.nn.Module) -> str:
    """A layer as a user finds it in their model, with the input it takes where its class says so."""
    what = f"{name or 'the model'} ({type(m).__name__}"
    takes = {torch.nn.Linear: lambda: f"last dim {m.in_features}",
             torch.nn.Conv1d: lambda: f"{m.in_channels} channels (N, C, L)",
             torch.nn.Conv2d: lambda: f"{m.in_channels} channels (N, C, H, W)",
             torch.nn.Conv3d: lambda: f"{m.in_channels} channels (N, C, D, H, W)",
             torch.nn.Embedding: lambda: f"indices below {m.num_embeddings}",
             torch.nn.LayerNorm: lambda: f"trailing dims {list(m.normalized_shape)}"}
    for cls, text in takes.items():
        if type(m) is cls:
            return f"{what}: takes {text()})"
    return f"{what})"
