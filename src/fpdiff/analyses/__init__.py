"""Every analysis declared once, as data: its name, its options dataclass, its run function, its command-line
arguments, its renderers (terminal, HTML, JUnit, the history's cells). The CLI, the Python API, the package's names
and the reports iterate over these declarations; built-ins and users' analyses register the same way, as entry points
of the group `fpdiff.analyses` (FPDIFF_DISABLE_PLUGIN_AUTOLOAD=1 keeps third-party ones out, as for backends)."""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fpdiff.analysis.base import Result, View, find_views_with
from fpdiff.core import plugins as entry_points
from fpdiff.core.errors import UsageError

ENTRY_POINT_GROUP = "fpdiff.analyses"
# the CLI's commands that are not analyses, and the API's names that are not: an analysis may take neither
RESERVED = frozenset({"examples", "backends", "rejudge", "report", "history", "diff", "cache", "worker",
                      "assert_agrees"})
if TYPE_CHECKING:
    from fpdiff.analysis.options import RunOptions

NAME = re.compile(r"[a-z][a-z0-9_]*")
# the shared options an analysis that loads a model and runs backends reads: all of RunOptions' (test_analyses holds
# the two lists together)
MODEL_RUN = ("plugins", "backend_flags", "timeout", "seed", "cache_dir", "inputs", "shapes", "task", "progress",
             "routes")
SWEEP = tuple(f for f in MODEL_RUN if f not in ("inputs", "shapes", "task"))  # a sweep brings its own models


@dataclass(frozen=True)
class Analysis:
    """One analysis, declared once.
    - run(model, options, shared) (run(options, shared) when it takes no model) returns its Result; `options` is its
      options dataclass; `shared` names the RunOptions fields it reads (its API keywords, its command-line groups),
      `defaults` its own defaults of those.
    - The command line: `arguments(parser)` adds its own; `from_args(args)` makes its options (default: the
      dataclass's fields read by name); `cli_groups`: extra groups (device; junit; store: the run is recorded in the
      history); `view(args)`: the terminal renderer's options; `files(args, console, result)`: its own files;
      `before(args, console)`: an answer before any run (an exit code, or None to run); `progress(args, display)`:
      what the progress display is told.
    - The reports: `terminal(result, console, **view)`; `html(report)`: the page's body (a notebook shows it too);
      `junit(result, strict)`: a testsuite; `cells(result)`: its rows in the history's columns (fpdiff diff compares
      those); `rows(report)`: its rows as a notebook's DataFrame (`result.to_pandas()`; default: the report's cells,
      else one row of its fields).
    - `rejudge(report)`: its stored JSON report judged again from the evidence it kept, without running a backend
      (`fpdiff rejudge`); None: its reports hold no cells to judge again.
    - `names`: the other public names it hands on (its result and options classes...)."""
    name: str
    summary: str
    run: Callable[..., Result]
    options: type
    terminal: Callable[..., None]
    html: Callable[[dict], str]
    takes_model: bool = True
    model_help: str = "spec .py, .onnx, exported program .pt2, hf:DIR (a Hugging Face checkpoint) or example:NAME"
    shared: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    from_args: Callable[[argparse.Namespace], Any] | None = None
    cli_groups: tuple[str, ...] = ()
    epilog: Callable[[], str] | None = None
    progress_label: str = "running"
    progress_unit: str = "cells"
    progress: Callable[[argparse.Namespace, Callable], Callable] | None = None
    view: Callable[[argparse.Namespace], dict] | None = None
    files: Callable[[argparse.Namespace, Any, Result], None] | None = None
    before: Callable[[argparse.Namespace, Any], int | None] | None = None
    junit: Callable[[Result, bool], Any] | None = None
    cells: Callable[[Result], list[tuple]] | None = None
    rows: Callable[[dict], list[dict]] | None = None
    rejudge: Callable[[dict], Result] | None = None
    names: Mapping[str, Any] = field(default_factory=dict)

    def options_from(self, args: argparse.Namespace) -> Any:
        """Its options from the parsed command line."""
        if self.from_args is not None:
            return self.from_args(args)
        return self.options(**{f.name: getattr(args, f.name) for f in dataclasses.fields(self.options)
                               if hasattr(args, f.name)})

    def shared_options(self, **given: Any) -> RunOptions:
        """The shared options of one run: what was given, on this analysis's defaults."""
        from fpdiff.analysis.options import RunOptions
        return RunOptions(**{**self.defaults, **given})

    def start(self, model: str | None, options: Any, shared: RunOptions) -> Result:
        """One run (the routes in force around it, `shared` checked once, and the run's registry built once for an
        analysis that runs backends: one that reads plugins or backend flags)."""
        from fpdiff.backends.routes import using
        with using(shared.routes):
            backends = {"plugins", "backend_flags"} & set(self.shared)
            shared = shared.ready() if backends else shared.checked()
            return self.run(model, options, shared) if self.takes_model else self.run(options, shared)


def check_declaration(a: Analysis) -> None:
    """A declaration's parts fit together, said when it registers (not when a user first runs it)."""
    from fpdiff.analysis import options as shared_options  # here: it loads torch, which `fpdiff --version` need not
    if not isinstance(a, Analysis):
        raise UsageError(f"{a!r} is not an fpdiff Analysis declaration")
    if not NAME.fullmatch(a.name) or a.name in RESERVED:
        raise UsageError(f"an analysis needs a lower-case name that is not one of fpdiff's commands, not {a.name!r}")
    if not dataclasses.is_dataclass(a.options):
        raise UsageError(f"analysis {a.name}: options must be a dataclass, not {a.options!r}")
    unknown = sorted(set(a.shared) - set(shared_options.fields()))
    unknown += sorted(set(a.defaults) - set(a.shared))
    if unknown:
        raise UsageError(f"analysis {a.name}: shared options it may not read: {', '.join(unknown)} (the shared "
                         f"options: {', '.join(shared_options.fields())})")
    clash = {f.name for f in dataclasses.fields(a.options)} & set(shared_options.fields())
    if clash:
        raise UsageError(f"analysis {a.name}: options {', '.join(sorted(clash))} are shared options (RunOptions)")
    takes = 2 + a.takes_model
    try:
        inspect.signature(a.run).bind(*range(takes))
    except TypeError:
        raise UsageError(f"analysis {a.name}: run must take ({'model, ' if a.takes_model else ''}options, shared)")\
            from None
    for part in ("terminal", "html"):
        if not callable(getattr(a, part)):
            raise UsageError(f"analysis {a.name}: {part} must be a function")
    for part in ("junit", "cells", "rows"):
        if getattr(a, part) is not None and not callable(getattr(a, part)):
            raise UsageError(f"analysis {a.name}: {part} must be a function or None")


class Analyses(entry_points.Named[Analysis]):
    """The registered analyses, by name: fpdiff's own entry points first (a third-party one can never take a
    built-in's name), then others; one that fails to load or to register is skipped with its reason."""

    def __init__(self) -> None:
        super().__init__(check_declaration, "analysis name {name!r} from {origin} is already taken by {by}",
                         "no analysis {name!r}; the analyses: {known}")

    def load_entry_points(self, autoload: bool) -> None:
        """The analyses' entry points (core.plugins: fpdiff's own first); a broken one skipped, said on stderr."""
        skipped = entry_points.load(ENTRY_POINT_GROUP, self.register, "analysis", autoload)
        for why in skipped.values():
            print(f"fpdiff: {why}", file=sys.stderr)
        self.skipped.update(skipped)


_registered: Analyses | None = None


def registered() -> Analyses:
    """The analyses of this process, loaded once."""
    global _registered
    if _registered is None:
        found = Analyses()
        found.load_entry_points(autoload=entry_points.autoload())
        _registered = found
    return _registered


def register(a: Analysis) -> None:
    """Add an analysis in this process (a notebook's, a test's); a package adds one as an entry point instead."""
    registered().register(a)


def get(name: str) -> Analysis:
    return registered().get(name)


def all_analyses() -> list[Analysis]:
    return registered().all()


def show(result: Result, console: Any = None, **view: Any) -> None:
    """A result in the terminal by its analysis's renderer, then what to run next."""
    from fpdiff.report import terminal
    terminal.show(result, get(result.kind).terminal, console, **view)


def html_page(report: dict) -> str:
    """The HTML page of a JSON report, by its "kind"; a report no registered analysis renders is one line."""
    kind = report.get("kind") if isinstance(report, dict) else None
    known = {a.name: a for a in all_analyses()}
    if kind not in known:
        raise UsageError(f"not an fpdiff report this fpdiff renders (kind {kind!r}; known: {', '.join(known)})")
    from fpdiff.report import html
    return html.render(report, known[kind].html)


def junit_suite(result: Result, strict: bool = False) -> Any:
    """The run's JUnit testsuite, by its analysis's declaration."""
    a = get(result.kind)
    if a.junit is None:
        takes = ", ".join(x.name for x in all_analyses() if x.junit is not None)
        raise UsageError(f"JUnit XML is written for {takes} runs, not {result.kind}")
    return a.junit(result, strict)


def notebook_view(kind: str) -> View | None:
    """How a notebook shows a result of `kind`: its registered declaration's renderers (None: no analysis of that
    kind is registered). Results find it through analysis.base, which this registry hands it to as it loads."""
    declared = next((a for a in all_analyses() if a.name == kind), None)
    if declared is None:
        return None
    from fpdiff.report import notebook
    return notebook.view(declared.html, declared.terminal, declared.rows)


find_views_with(notebook_view)


def compared_kinds() -> list[str]:
    """The analyses whose runs the history keeps cell by cell (fpdiff diff compares those)."""
    return [a.name for a in all_analyses() if a.cells is not None]
