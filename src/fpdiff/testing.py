"""fpdiff inside a test suite: `assert_agrees` fails a test with the grid of what disagreed, over the same API as
the CLI. The pytest plugin (fpdiff/pytest_plugin.py) adds a marker and fixtures on top."""
from __future__ import annotations

import inspect
import io
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from fpdiff.core.errors import UsageError

_SPEC = '''"""Written by fpdiff.assert_agrees for an in-memory module; its class imports from where it was defined."""
import sys

import torch

sys.path[:0] = {paths!r}


def model():
    return torch.load({module!r}, weights_only=False)


def inputs():
    return tuple(torch.load({inputs!r}))
'''


def _as_spec(model: torch.nn.Module, inputs: tuple, folder: Path) -> str:
    """An in-memory module as a spec file the workers can load: the module pickled, its defining file's root on
    sys.path so the class imports there too."""
    cls = type(model)
    paths = []
    try:
        file = Path(inspect.getfile(cls)).resolve()
        paths.append(str(file.parents[cls.__module__.count(".")]))
    except (TypeError, OSError, IndexError):
        pass
    buf = io.BytesIO()
    try:
        torch.save(model, buf)
    except Exception as e:
        raise UsageError(f"assert_agrees cannot hand {cls.__name__} to its workers ({type(e).__name__}: {e}); "
                         "write a spec file (model(), inputs()) and pass its path") from None
    (folder / "module.pt").write_bytes(buf.getvalue())
    torch.save(tuple(t.detach().cpu() for t in inputs), folder / "inputs.pt")
    spec = folder / "fpdiff_module_spec.py"
    spec.write_text(_SPEC.format(paths=paths, module=str(folder / "module.pt"), inputs=str(folder / "inputs.pt")))
    return str(spec)


def grid_text(result, width: int = 140) -> str:
    """The check grid, its reasons and what to run next, as plain text, as the terminal shows them."""
    from rich.console import Console

    from fpdiff import analyses
    console = Console(record=True, width=width, file=io.StringIO(), color_system=None)
    analyses.show(result, console)
    return console.export_text()


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
            model = _as_spec(model, inputs, Path(tmp))
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
