"""fpdiff inside a test suite: `assert_agrees` fails a test with the grid of what disagreed, over the same API as
the CLI. The pytest plugin (fpdiff/pytest_plugin.py) adds a marker and fixtures on top."""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from fpdiff.core.errors import UsageError
from fpdiff.sources.module import module_spec


def grid_text(result, width: int = 140) -> str:
    """The check grid, its reasons and what to run next, as plain text, as the terminal shows them."""
    from fpdiff import analyses
    from fpdiff.report import notebook
    return notebook.text(result, analyses.get(result.kind).terminal, width)


def assert_agrees(model, inputs: Sequence[torch.Tensor] | torch.Tensor | None = None, *,
                  backends: Sequence[str] = ("torch",), precisions: Sequence[str] = ("fp32",),
                  strict: bool = False, **check_kwargs):
    """Check `model` (a module with `inputs`, or a spec file, ONNX file or example:NAME) on backends x precisions;
    raise AssertionError with the grid when a cell fails the run (with `strict`: anything but a clean pass).
    Returns the CheckResult otherwise."""
    from fpdiff.analyses import get
    with tempfile.TemporaryDirectory(prefix="fpdiff-assert-") as tmp:
        if isinstance(model, torch.nn.Module):
            if inputs is None:
                raise UsageError("assert_agrees(module, inputs): the inputs are needed with a module")
            inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
            model = module_spec(model, inputs, Path(tmp), who="assert_agrees")
        elif inputs is not None:
            raise UsageError("assert_agrees: inputs go with a module; a spec file makes its own")
        result = get("check").start(str(model), *_options(backends, precisions, check_kwargs))
    if result.exit_code(strict=strict):
        nothing = result.nothing_judged()  # nothing could run: not a pass either
        raise AssertionError(f"fpdiff: {model}: {nothing}\n{grid_text(result)}" if nothing else
                             f"fpdiff: {model} does not agree across {', '.join(backends)} x "
                             f"{', '.join(precisions)}\n{grid_text(result)}")
    return result


def _options(backends: Sequence[str], precisions: Sequence[str], kwargs: dict) -> tuple:
    """check's options and the shared ones from assert_agrees' keywords (an unknown one is a TypeError, as for any
    function)."""
    from fpdiff.analyses import get
    from fpdiff.analysis.options import split
    a = get("check")
    own, shared = split(kwargs, a.options)
    return a.options(backends=list(backends), precisions=list(precisions), **own), a.shared_options(**shared)
