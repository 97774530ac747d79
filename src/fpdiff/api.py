"""The Python API; the CLI and the pytest plugin are thin layers over it. Each registered analysis is a function
here, made from its declaration: its model (when it takes one), then keywords: its own options and the shared ones it
reads, each validated once."""
from __future__ import annotations

import dataclasses
import difflib
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fpdiff import (
    analyses,
    examples,  # noqa: F401  (handed on: CORE; examples.names() lists them)
)
from fpdiff.analyses import Analysis
from fpdiff.analyses.args import csv
from fpdiff.analysis import options as shared_options
from fpdiff.analysis.base import Result
from fpdiff.analysis.options import RunOptions
from fpdiff.backends.routes import Routes  # noqa: F401  (handed on: CORE)
from fpdiff.core.errors import FpdiffError, UnknownOption, UsageError  # noqa: F401  (handed on: CORE)
from fpdiff.core.precision import QUANTIZED, canonical
from fpdiff.testing import assert_agrees  # noqa: F401

# the API's names that are not analyses (each analysis adds its function and the names it declares)
CORE = ["assert_agrees", "examples", "rejudge", "Routes", "RunOptions", "FpdiffError", "UsageError"]


def rejudge(report: str | Path | dict) -> Result:
    """A stored JSON report of an analysis that judges cells (check, ops, fuzz; its path, or the report as a dict)
    judged again by this fpdiff's rules from the evidence it kept, without running a backend; `.rejudged` says which
    cells changed and which rules it could not re-apply."""
    from fpdiff import analyses
    from fpdiff.report.json_report import load
    data = report if isinstance(report, dict) else load(report)
    kind = data.get("kind")
    found = next((a for a in analyses.all_analyses() if a.name == kind and a.rejudge is not None), None)
    if found is None:
        can = ", ".join(a.name for a in analyses.all_analyses() if a.rejudge is not None)
        raise UsageError(f"rejudge takes a JSON report of {can}; this one is " + (
            f"the report of fpdiff {kind}" if isinstance(kind, str) and kind else "not a report of fpdiff's"))
    return found.rejudge(data)


def function(a: Analysis) -> Callable[..., Any]:
    """The API function of an analysis: `name(model, **keywords)`; `iree_flags` is the older spelling of
    backend_flags={"iree": ...}."""
    signature = _signature(a)

    def run(*args: Any, **kwargs: Any) -> Any:
        given = forgiven(a.name, signature, args, kwargs)
        model = _held_model(a, given.pop("model", None), given)
        iree = given.pop("iree_flags", ())
        if iree:
            flags = dict(given.get("backend_flags") or {})
            flags["iree"] = [*flags.get("iree", ()), *((iree,) if isinstance(iree, str) else iree)]
            given["backend_flags"] = flags
        own, shared = shared_options.split(given, a.options)
        return a.start(model, a.options(**own), a.shared_options(**shared))

    run.__name__ = run.__qualname__ = a.name
    run.__doc__ = f"{a.summary}.\n\n{inspect.getdoc(a.options) or ''}\n\n{inspect.getdoc(RunOptions) or ''}"
    run.__signature__ = signature  # type: ignore[attr-defined]
    return run


def forgiven(name: str, signature: inspect.Signature, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the analysis takes them, forgiving what people type: a comma string for a list, torch's
    names and dtypes for precisions, progress=False for none; a keyword that is not the analysis's (`backend=` to
    check, which takes `backends=`) is one line naming the right one."""
    try:
        given = dict(signature.bind(*args, **kwargs).arguments)
    except TypeError as e:
        raise UnknownOption(f"{name}: {_slip(str(e), kwargs, signature)}") from None
    import torch
    for key, value in list(given.items()):
        if key in _LISTS and isinstance(value, str):
            given[key] = value = csv(value)
        if key == "precision" and value is not None:  # a quantized format by its name (locate takes one)
            quantized = isinstance(value, str) and value.strip().lower() in QUANTIZED
            given[key] = value.strip().lower() if quantized else canonical(value)
        elif key == "precisions" and value is not None:
            names = (value,) if isinstance(value, torch.dtype) else value
            given[key] = list(dict.fromkeys(canonical(v) for v in names))
    if given.get("progress") is False:
        given["progress"] = None
    return given


# options that are lists of names, which a comma string gives as well (as on the command line)
_LISTS = ("backends", "precisions", "devices", "shape_variants", "plugins", "ops", "catalog", "variants")


def _slip(message: str, kwargs: dict[str, Any], signature: inspect.Signature) -> str:
    """Python's own complaint about the call, with the keyword meant where one is near (a plural slip, a typo)."""
    known = list(signature.parameters)
    for k in kwargs:
        if k in known:
            continue
        near = [n for n in (k + "s", k.removesuffix("s")) if n in known and n != k] or \
            difflib.get_close_matches(k, known, n=1, cutoff=0.75)
        if near:
            return f"no option {k}=; did you mean {near[0]}=?"
        return f"no option {k}=; the options: {', '.join(known)}"
    return message


def _held_model(a: Analysis, model: Any, given: dict[str, Any]) -> str | None:
    """MODEL as the analysis takes it: a path or name as given; a model held in Python (an nn.Module, its example
    inputs in `inputs=`) as the spec file its workers load (sources/module.py); anything else one line."""
    import torch

    from fpdiff.sources.module import example_inputs, module_spec
    reads_file = "inputs" in a.shared
    if model is None or isinstance(model, (str, os.PathLike)):
        if not reads_file and given.pop("inputs", None) is not None:
            raise UsageError(f"{a.name} reads no inputs file: inputs= goes with an nn.Module")
        return None if model is None else str(model)
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"{a.name}: MODEL is a spec .py file, an .onnx file, example:NAME or an nn.Module with its "
                         f"inputs=(tensor, ...), not {type(model).__name__}")
    return module_spec(model, example_inputs(given.pop("inputs", None), f"{a.name}(module)"), who=a.name)


def _signature(a: Analysis) -> inspect.Signature:
    kw = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation="str | torch.nn.Module")] if a.takes_model else []
    for f in dataclasses.fields(a.options):
        params.append(inspect.Parameter(f.name, kw, default=_default(f), annotation=f.type))
    shared = {f.name: f for f in dataclasses.fields(RunOptions)}
    for name in a.shared:
        default = a.defaults[name] if name in a.defaults else _default(shared[name])
        params.append(inspect.Parameter(name, kw, default=default, annotation=shared[name].type))
    if a.takes_model and "inputs" not in a.shared:  # a module's example inputs, for an analysis that reads no file
        params.append(inspect.Parameter("inputs", kw, default=None, annotation="Sequence[torch.Tensor] | None"))
    if "backend_flags" in a.shared:
        params.append(inspect.Parameter("iree_flags", kw, default=(), annotation="Sequence[str]"))
    return inspect.Signature(params)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]


def names() -> list[str]:
    """Every public name: the core ones, each analysis's function and the names it declares."""
    out = list(CORE)
    for a in analyses.all_analyses():
        out += [a.name, *a.names]
    return list(dict.fromkeys(out))


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return names()
    for a in analyses.all_analyses():
        if name == a.name:
            value = globals()[name] = function(a)
            return value
        if name in a.names:
            return a.names[name]
    raise AttributeError(f"module 'fpdiff.api' has no attribute {name!r}")
