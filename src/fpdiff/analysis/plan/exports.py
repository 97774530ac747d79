"""The verified plan written for each target a user ships it to (`--export TARGET=PATH`): one small writer per target
(plan/targets/, registered as `fpdiff.plan_exports` entry points, as backends are), each file read back for the
dtypes it computes in and run again where its numbers can be computed, judged by the plan's tolerance against the
plan's float64 outputs. A target that cannot express the plan writes nothing and says why; the plan stands whatever
happens to a file."""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fpdiff.analysis.plan.jobs import ProgramFile, ProgramTrials, error, failure
from fpdiff.analysis.plan.search import Export, ExportRun
from fpdiff.core import plugins as entry_points
from fpdiff.core import precision as prec
from fpdiff.core.errors import MESSAGE_CHARS, StageError, Unsupported, UsageError, raised_by_fpdiff
from fpdiff.core.status import Status

NEEDS_TORCH = ("{what} converts the plan's torch program, and this plan is of an ONNX model; plan the "
               "model's torch source (a spec file) to export it here")


@dataclass
class Context:
    """What every writer reads: the plan's trials (its program, inputs, float64 outputs, jobs), its kept ops, its
    precision, and the backends known here."""
    reg: Any
    trials: ProgramTrials
    keep: frozenset[str]
    p: prec.Precision

    @property
    def is_torch(self) -> bool:
        return hasattr(self.trials, "gm")  # TorchTrials: the plan's torch program (an ONNX plan has a graph)

    @property
    def jobs(self):
        return self.trials.jobs


Writer = Callable[[Context, Path, Export], None]
ENTRY_POINT_GROUP = "fpdiff.plan_exports"


@dataclass(frozen=True)
class ExportTarget:
    """A format a verified plan ships in, declared as a backend is: its name (--export NAME=PATH), the suffix of the
    file it writes, and its writer, which writes the file, reads it back and runs it again, all recorded on the
    Export (a target that cannot express the plan writes nothing and sets the reason)."""
    name: str
    suffix: str
    write: Writer
    what: str = ""  # one line: what the file holds


def check_declaration(t: object) -> None:
    """A target's declaration, checked where it registers: one line naming what is wrong."""
    if not isinstance(t, ExportTarget):
        raise UsageError(f"an export target is an ExportTarget, not {type(t).__name__}")
    if not t.name or not isinstance(t.name, str) or "=" in t.name:
        raise UsageError(f"export target {t.name!r}: a name without '='")
    if not t.suffix.startswith("."):
        raise UsageError(f"export target {t.name}: suffix {t.suffix!r} must start with '.'")
    if not callable(t.write):
        raise UsageError(f"export target {t.name}: write must be a function")


class Targets(entry_points.Named[ExportTarget]):
    """The registered export targets, by name: fpdiff's own entry points first (a third-party one can never take a
    built-in's name); one that fails to load or to register is skipped with its reason."""

    def __init__(self) -> None:
        super().__init__(check_declaration, "export target {name!r} from {origin} is already taken by {by}",
                         "unknown target {name!r}; targets: {known}")


_targets: Targets | None = None


def targets() -> Targets:
    """The export targets of this process, loaded once from their entry points."""
    global _targets
    if _targets is None:
        found = Targets()
        found.skipped.update(entry_points.load(ENTRY_POINT_GROUP, found.register, "export target",
                                               entry_points.autoload()))
        _targets = found
    return _targets


def register(t: ExportTarget) -> None:
    """Add an export target in this process (a notebook's, a test's); a package adds one as an entry point."""
    targets().register(t)


def parse(specs: Iterable[str]) -> dict[str, str]:
    """`--export TARGET=PATH` options as {target: path}; a malformed one is one line."""
    out: dict[str, str] = {}
    for spec in specs:
        target, eq, path = spec.partition("=")
        if not eq:
            raise UsageError(f"--export {spec}: give TARGET=PATH (targets: {', '.join(targets().names())})")
        if target.strip() in out:
            raise UsageError(f"--export {target.strip()} is given twice: one path per target")
        out[target.strip()] = path.strip()
    return out


def requested(exports: Mapping[str, str] | Iterable[str] | None, export_onnx: str | None) -> dict[str, str]:
    """The targets asked for ({target: path}, or TARGET=PATH strings; `export_onnx` is `onnx=PATH`), each known,
    its path of the target's kind and writable: refused in one line before any work."""
    wanted = dict(exports) if isinstance(exports, Mapping) else parse(exports or ())
    if export_onnx:
        if wanted.get("onnx", export_onnx) != export_onnx:
            raise UsageError(f"--export-onnx {export_onnx} and --export onnx={wanted['onnx']} name two paths")
        wanted["onnx"] = export_onnx
    for target, path in wanted.items():
        check(target, str(path))
    paths = [str(Path(p).resolve()) for p in wanted.values()]
    if len(set(paths)) < len(paths):
        raise UsageError("two --export targets name the same path")
    return {t: str(p) for t, p in wanted.items()}


def check(target: str, path: str) -> None:
    """One target's path: a known target, the file kind it writes, a folder it can be written in."""
    known = targets()
    if target not in known.names():
        raise UsageError(f"--export {target}={path}: unknown target {target!r}; targets: {', '.join(known.names())}")
    suffix = known.get(target).suffix
    if not path or not path.endswith(suffix):
        raise UsageError(f"--export {target}={path}: {target} exports are {suffix} files")
    folder = Path(path).resolve().parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--export {target}={path}: cannot write there ({e.strerror or e})") from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--export {target}={path}: cannot write there (the folder is not writable)")


def write_all(reg, trials: ProgramTrials, keep: Iterable[str], p: prec.Precision,
              wanted: Mapping[str, str]) -> list[Export]:
    """Every export asked for, in the order asked."""
    ctx = Context(reg, trials, frozenset(keep), p)
    return [write(ctx, target, path) for target, path in wanted.items()]


def write(ctx: Context, target: str, path: str) -> Export:
    """One target's export; a file that cannot be written or a converter that refuses the program is its reason,
    an error of fpdiff's own code raises."""
    e = Export(target, path, tolerance=ctx.trials.tolerance)
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        targets().get(target).write(ctx, out, e)
    except OSError as x:  # only the file could not be written
        e.reason = f"cannot write {path}: {x.strerror or x}"
    except (StageError, Unsupported) as x:  # a converter's failure, already charged to it
        e.reason = f"{target} conversion failed: {getattr(x, 'component', '') or target}: {one_line(x)}"
    except Exception as x:
        if raised_by_fpdiff(x):
            raise
        e.reason = f"{target} conversion failed: {one_line(x)}"
    e.verified = e.written and bool(e.runs) and all(r.passed for r in e.runs)
    if e.written and e.runs and not e.verified and not e.reason:
        e.reason = "; ".join(f"{r.backend}: {r.reason or f'error {r.error:.3g} over the tolerance'}"
                             for r in e.runs if not r.passed)
    return e


def one_line(x: BaseException) -> str:
    text = " ".join(str(x).split())
    return f"{type(x).__name__}: {text[:MESSAGE_CHARS]}" if text else type(x).__name__


def run(ctx: Context, e: Export, backend: str, program: Path, names: list[str], precision: prec.Precision,
         artifact: Path | None = None) -> None:
    """The exported file (`program`, or the converted `artifact` of the plan's program) as a job on `backend`,
    judged against the plan's float64 outputs; recorded on the export."""
    t = ctx.trials
    r = ctx.jobs.program(backend, ProgramFile(program, t.inputs, names, t.requires), precision=precision,
                         artifact=artifact)
    if r.status != Status.OK:
        e.runs.append(ExportRun(backend, precision.name, reason=f"{r.status}: {failure(r)}", op_dtypes=r.op_dtypes))
        return
    err = error(t.expected, r)
    e.runs.append(ExportRun(backend, precision.name, err, err <= t.tolerance, op_dtypes=r.op_dtypes))


def scratch(ctx: Context, out: Path) -> Path:
    """A copy of the written file in the plan's scratch folder: what a backend writes beside it stays out of the
    user's folder."""
    copy = ctx.jobs.path("export", out.suffix)
    (shutil.copytree if out.is_dir() else shutil.copyfile)(out, copy)
    return copy


@contextlib.contextmanager
def quiet() -> Iterator[io.StringIO]:
    """Converters print progress bars and platform warnings: the export's own line says what matters."""
    import logging
    buf = io.StringIO()
    level = logging.root.manager.disable
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield buf
        finally:
            logging.disable(level)


def artifact_runner(reg, suffix: str) -> str | None:
    """The backend that runs a converted file of this suffix as a user's own (its `artifacts` declaration)."""
    return next((n for n in reg.names() if suffix in reg.cls(n).artifacts
                 and reg.cls(n).implements("prepare_artifact")), None)
