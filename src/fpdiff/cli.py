"""Command line: parses, calls the API, prints. fpdiff's own errors are one line each, the exit code by kind: the
user's input 2; a float64 reference that cannot run or a model an analysis cannot take 3 (nothing judged).

Every analysis is one builder (its subcommand: its own options, and the shared groups that make sense for it) and
one run function (calls the API, hands the result to `_finish`: the terminal, its files, JSON, HTML, JUnit, the
history and the exit code, all by the result's kind)."""
from __future__ import annotations

import argparse
import contextlib
import contextvars
import os
import sys
from collections.abc import Callable
from pathlib import Path

from fpdiff.core.errors import FpdiffError, UsageError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
QUIET_HELP = "show no progress (it goes to stderr, and only when stderr is a terminal)"
JSON_STDOUT = "-"  # --json -: the JSON report is stdout's only content
# where `--json -` writes: the real stdout, while anything else printed during the run goes to stderr
_JSON_OUT: contextvars.ContextVar = contextvars.ContextVar("fpdiff_json_out", default=None)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        self.exit(EXIT_USAGE, f"fpdiff: error: {message}\n")


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _shape(text: str) -> tuple[str, list[int]]:
    name, _, dims = text.partition("=")
    try:
        values = [int(d) for d in dims.split(",")] if dims else []
    except ValueError:
        values = []
    if not name or not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"--shape wants NAME=D0,D1,... with integers, got {text!r}")
    return name, values


def _backend_flag(text: str) -> tuple[str, str]:
    name, _, flag = text.partition("=")
    if not name.strip() or not flag:
        raise argparse.ArgumentTypeError(f"--backend-flag wants NAME=FLAG (iree=--iree-opt-level=O3), got {text!r}")
    return name.strip(), flag


def _iree_flag(text: str) -> tuple[str, str]:
    return "iree", text  # --iree-flag FLAG is --backend-flag iree=FLAG


def _version() -> str:
    import fpdiff
    found = getattr(fpdiff, "__version__", None)
    if found is None:
        from importlib.metadata import version
        found = version("fpdiff")
    return f"fpdiff {found}"


def _group(add: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    p = _Parser(add_help=False)
    add(p)
    return p


def _plugins(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugin", action="append", default=[], metavar="PATH", help="load backends from a .py file")


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend-flag", action="append", default=[], type=_backend_flag, metavar="NAME=FLAG",
                   help="a flag for backend NAME (repeatable; for backends that take flags); yours win over fpdiff's")
    p.add_argument("--iree-flag", action="append", dest="backend_flag", type=_iree_flag, metavar="FLAG",
                   help="the same as --backend-flag iree=FLAG")


def _timeout(p: argparse.ArgumentParser) -> None:
    from fpdiff.runtime.worker import DEFAULT_TIMEOUT
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help="seconds per job: a cell, a segment's compile and run, a trial (default %(default)s)")


def _cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", action="store_true", help="do not reuse compiled artifacts")
    p.add_argument("--cache-dir", default=None, help="where compiled artifacts are kept (default: FPDIFF_CACHE, "
                   "else ~/.cache/fpdiff)")


def _seed(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0, help="seed of generated inputs (default %(default)s)")


def _device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N] (default %(default)s)")


def _inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--inputs", help="npz with one array per ONNX input")
    p.add_argument("--shape", type=_shape, action="append", default=[], metavar="NAME=D0,D1",
                   help="shape of an ONNX input with symbolic dims (repeatable)")


def _routes(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend-python", action="append", default=[], metavar="NAME=PYTHON",
                   help="run backend NAME (e.g. ort@1.20: backend ort) in that interpreter's fpdiff worker")
    p.add_argument("--backend-host", action="append", default=[], metavar="NAME=HOST:PORT",
                   help="run backend NAME on a remote `fpdiff worker --listen`")
    p.add_argument("--token-file", metavar="PATH", help="shared token for --backend-host (else FPDIFF_TOKEN)")


def _reports(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="PATH", help="write the JSON report here ('-': stdout, and everything else "
                   "to stderr)")
    p.add_argument("--html", metavar="PATH", help="write a self-contained HTML report here")


def _history_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH", help="the run history (default: FPDIFF_STORE, else "
                   "~/.local/share/fpdiff/history.sqlite)")
    p.add_argument("--no-store", action="store_true", help="do not record this run in the history")


GROUPS = {"plugins": _plugins, "flags": _flags, "timeout": _timeout, "cache": _cache, "seed": _seed,
          "device": _device, "inputs": _inputs, "routes": _routes, "reports": _reports, "store": _history_options}
RUNS_BACKENDS = ("plugins", "flags", "timeout", "seed", "inputs", "routes", "reports", "store")


def _shared(*names: str) -> list[argparse.ArgumentParser]:
    """The shared option groups by name, as argparse parents."""
    return [_group(GROUPS[n]) for n in names]


def _check_parser(sub) -> None:
    from fpdiff.analysis.check import DEFAULT_BACKENDS, DEFAULT_REPEAT
    from fpdiff.core.precision import DEFAULT_PRECISIONS, PRECISIONS
    from fpdiff.core.status import NOTHING_JUDGED
    c = sub.add_parser("check", help="the precision x backend x shape grid, judged by float64",
                       parents=_shared(*RUNS_BACKENDS, "cache", "device"),
                       epilog=f"exit {EXIT_OK}: every judged cell holds; {EXIT_FAIL}: a cell is mismatch, error, crash "
                       f"or timeout (--strict: not a clean pass); {EXIT_USAGE}: usage or input error; "
                       f"{NOTHING_JUDGED}: nothing was judged and nothing failed (every cell unsupported or "
                       "unjudged, or the model's float64 reference did not run)")
    c.add_argument("model", help="spec .py file, .onnx file, or example:NAME")
    c.add_argument("--backends", type=_csv, default=list(DEFAULT_BACKENDS),
                   help=f"comma list (default {','.join(DEFAULT_BACKENDS)})")
    c.add_argument("--precisions", type=_csv, default=list(DEFAULT_PRECISIONS),
                   help=f"comma list of {','.join(PRECISIONS)} (default {','.join(DEFAULT_PRECISIONS)})")
    c.add_argument("--devices", type=_csv, default=None, help="comma list of cpu,cuda (default: --device)")
    c.add_argument("--shape-variants", type=_csv, default=None, help="only these variants (static,dynamic,...)")
    c.add_argument("--allow-nonfinite", action="store_true", help="run even if inputs hold NaN/Inf")
    c.add_argument("--artifact", action="append", default=[], metavar="BACKEND[:PRECISION]=PATH",
                   help="run your own converted file (.pte, .tflite, .onnx) on BACKEND in place of fpdiff's "
                   "conversion, judged against MODEL's float64 at the precision the file computes in (or PRECISION); "
                   "inputs matched by name, then position; repeatable")
    c.add_argument("--junit", metavar="PATH", help="write JUnit XML here: one testcase per cell, for CI")
    c.add_argument("--strict", action="store_true",
                   help="exit 1 unless every cell passes with no dtype-changed or coarser-than-requested finding")
    c.add_argument("--repeat", type=int, default=DEFAULT_REPEAT,
                   help="runs per cell; outputs that differ bitwise are flagged nondeterministic (default %(default)s)")
    c.add_argument("--keep-opset", action="store_true",
                   help="judge an old-opset ONNX model as given, without converting it to the current opset")


def _locate_parser(sub) -> None:
    loc = sub.add_parser("locate", help="the first op whose own error at a precision is out of line",
                         parents=_shared(*RUNS_BACKENDS, "device"))
    loc.add_argument("model", help="spec .py file, .onnx file or example:NAME")
    loc.add_argument("--backend", default="torch",
                     help="torch: per-op analysis; any other backend or plugin: bisection over segments")
    loc.add_argument("--precision", default="fp16")
    loc.add_argument("--repro", metavar="DIR", help="where the repro bundle goes "
                     "(default fpdiff-out/repro-BACKEND-PRECISION when there is something to reproduce)")
    loc.add_argument("--no-repro", action="store_true", help="write no repro bundle")
    loc.add_argument("--mark-all", action="store_true", help="one run with every tensor marked as an output, on a "
                     "backend that implements it (fast; may change what the backend fuses and so hide a fusion bug)")
    loc.add_argument("--shape-variant", help="segments keep this variant's dynamic dims (static, dynamic, mixed:...)")
    loc.add_argument("--artifact", metavar="PATH", help="your own converted file for --backend (.pte, .tflite, .onnx): "
                     "judged whole first, then localized by the model's ops (the file's runtime exposes no "
                     "intermediates), saying whether fpdiff's conversion departs as the file does")
    loc.add_argument("--top", type=int, default=10, help="rows in the table of worst ops")
    loc.add_argument("--model-explorer", metavar="PATH", help="write Model Explorer node data (local error here, "
                     "accumulated error beside it as *.accumulated.json)")


def _ranges_parser(sub) -> None:
    r = sub.add_parser("ranges", help="ranges of every float64 intermediate, judged for fp16 and bf16",
                       parents=_shared("seed", "reports"))
    r.add_argument("model", help="spec .py file or example:NAME")
    r.add_argument("--precision", default="fp16,bf16", help="comma list of fp16,bf16 (default %(default)s)")
    r.add_argument("--all", action="store_true", help="every op, not only those with findings")


def _plan_parser(sub) -> None:
    pl = sub.add_parser("plan", help="the ops to keep in fp32 so fp16/bf16 meets a tolerance, verified",
                        parents=_shared(*RUNS_BACKENDS, "device"))
    pl.add_argument("model", help="spec .py file, .onnx file, or example:NAME")
    pl.add_argument("--precision", default="fp16", help="fp16 or bf16 (default %(default)s)")
    pl.add_argument("--backend", default="torch", help="where the plan is verified (default %(default)s)")
    pl.add_argument("--tolerance", type=float, default=None,
                    help="relative L2 vs float64 to meet (default: the precision's check tolerance)")
    pl.add_argument("--save", metavar="PATH", help="write the verified plan (JSON) here")
    pl.add_argument("--load", metavar="PATH", help="re-verify a saved plan instead of searching")
    pl.add_argument("--export", action="append", default=[], metavar="TARGET=PATH",
                    help="write the verified plan for a target and verify the file (repeatable): onnx (fp32 in and "
                    "out), onnx-typed (the precision's dtype, every value typed: TensorRT's strongly typed mode), "
                    "coreml (.mlpackage), executorch (.pte, XNNPACK), litert (says why it cannot)")
    pl.add_argument("--export-onnx", metavar="PATH", help="the same as --export onnx=PATH")
    pl.add_argument("--no-speed", action="store_true", help="do not time the planned model")


def _ops_parser(sub) -> None:
    from fpdiff.analysis.ops import DEFAULT_BACKENDS, DEFAULT_PRECISIONS
    o = sub.add_parser("ops", help="every op of the catalogs, under variants, on every backend, judged by float64",
                       parents=_shared("plugins", "flags", "timeout", "seed", "routes", "reports", "store", "cache"),
                       epilog=f"exit {EXIT_OK}: no cell failed; {EXIT_FAIL}: a cell is mismatch, error, crash or "
                       f"timeout; {EXIT_USAGE}: usage error (an unknown op pattern lists the closest names)")
    o.add_argument("--catalog", type=_csv, default=["torch", "onnx"], help="comma list of torch,onnx (default both)")
    o.add_argument("--ops", type=_csv, default=None, metavar="PATTERN[,PATTERN...]",
                   help="case-insensitive globs over op names (nn.functional.avg_pool2d, '*avg_pool*', AveragePool)")
    o.add_argument("--variants", type=_csv, default=None, metavar="NAME,...",
                   help="variant generators, or default, all, sample (the catalogs' own samples only); "
                   "--list-variants says what each finds")
    o.add_argument("--backends", type=_csv, default=list(DEFAULT_BACKENDS),
                   help=f"comma list (default {','.join(DEFAULT_BACKENDS)})")
    o.add_argument("--precisions", type=_csv, default=list(DEFAULT_PRECISIONS),
                   help=f"comma list (default {','.join(DEFAULT_PRECISIONS)})")
    o.add_argument("--samples", type=int, default=1, help="catalog samples per op (default %(default)s)")
    o.add_argument("--time", type=_duration, default=None, metavar="BUDGET",
                   help="no new batch starts after this long (90s, 10m, 2h); the rest is counted as unrun")
    o.add_argument("--ray", metavar="ADDRESS", help="spread batches over a Ray cluster ('local' starts one)")
    o.add_argument("--save", metavar="TABLE", help="write the support table of this stack here (JSON; "
                   "fpdiff diff A.json B.json says what changed)")
    o.add_argument("--repro-dir", default="fpdiff-out/ops", help="where failing cells' repros go (default %(default)s)")
    o.add_argument("--no-repro", action="store_true", help="write no repro")
    o.add_argument("--junit", metavar="PATH", help="write JUnit XML here: one testcase per cell")
    o.add_argument("--list-variants", action="store_true", help="list the variant generators and exit")
    # one op's cell needs seconds; a cell still running after two minutes is hung, and costs only itself
    o.set_defaults(timeout=120.0)


def _fuzz_parser(sub) -> None:
    from fpdiff.analysis.fuzz import DEFAULT_BACKENDS, DEFAULT_PRECISIONS
    from fpdiff.core.status import NOTHING_JUDGED
    f = sub.add_parser("fuzz", help="random graphs of the catalog's ops on every backend, judged by float64, failures "
                       "minimized and deduplicated", parents=_shared("plugins", "flags", "timeout", "seed", "routes",
                                                                     "reports", "cache"),
                       epilog=f"exit {EXIT_OK}: no finding; {EXIT_FAIL}: a finding; {NOTHING_JUDGED}: no graph could "
                       f"be judged; {EXIT_USAGE}: usage error")
    f.add_argument("--backends", type=_csv, default=list(DEFAULT_BACKENDS),
                   help=f"comma list (default {','.join(DEFAULT_BACKENDS)})")
    f.add_argument("--precisions", "--precision", dest="precisions", type=_csv, default=list(DEFAULT_PRECISIONS),
                   help=f"comma list (default {','.join(DEFAULT_PRECISIONS)})")
    f.add_argument("--graphs", type=int, default=None, metavar="N",
                   help="graphs to generate (default 50 when --time is not given)")
    f.add_argument("--time", type=_duration, default=None, metavar="BUDGET",
                   help="no new graph starts after this long (90s, 10m, 2h); found failures are still minimized")
    f.add_argument("--ops", type=_csv, default=None, metavar="PATTERN[,PATTERN...]",
                   help="case-insensitive globs over the vocabulary's ops and their catalog names ('*softmax*')")
    f.add_argument("--max-ops", type=int, default=6, help="ops per graph at most (default %(default)s)")
    f.add_argument("--forms", type=_csv, default=None, metavar="torch,onnx",
                   help="graph forms: torch programs (every backend), ONNX graphs (ONNX backends); default both")
    f.add_argument("--ray", metavar="ADDRESS", help="spread batches over a Ray cluster ('local' starts one)")
    f.add_argument("--repro-dir", default="fpdiff-out/fuzz", help="where findings' repros go (default %(default)s)")
    f.add_argument("--no-repro", action="store_true", help="write no repro")
    # a graph of a few ops needs seconds per cell (inductor and IREE compile); two minutes is a hang
    f.set_defaults(timeout=120.0)


def _duration(text: str) -> float:
    """90, 90s, 10m, 2h: seconds."""
    import re
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"a duration is like 90s, 10m or 2h, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _other_parsers(sub) -> None:
    sub.add_parser("examples", help="list the built-in example models")
    sub.add_parser("backends", help="list registered backends and whether they are available",
                   parents=_shared("plugins", "routes"))
    rj = sub.add_parser("rejudge", help="a stored check's --json report judged again by this fpdiff's rules, from the "
                        "evidence it kept (no backend runs)", parents=_shared("reports"),
                        epilog="exit as for check, by the verdicts judged again; the cells whose verdict changed and "
                        "any rule the stored run lacks the evidence for are listed")
    rj.add_argument("run", metavar="RUN.json", help="a check's report written with --json")
    rj.add_argument("--strict", action="store_true", help="as for check")
    rep = sub.add_parser("report", help="a self-contained HTML report from a --json file of any analysis")
    rep.add_argument("json_file", metavar="RUN.json")
    rep.add_argument("-o", "--output", required=True, metavar="PATH", help="the HTML file to write")
    h = sub.add_parser("history", help="list the stored runs (all, or one model's)")
    h.add_argument("model", nargs="?", help="only this model (as it was named: a path, example:NAME)")
    h.add_argument("--store", metavar="PATH", help="the run history (default as for check)")
    d = sub.add_parser("diff", help="cells whose verdict or error changed between two stored runs; exit 1 on a "
                       "regression")
    d.add_argument("run_a", metavar="A", help="a stored run's id, or a support table saved by fpdiff ops --save")
    d.add_argument("run_b", metavar="B", help="the same for the other side")
    d.add_argument("--store", metavar="PATH", help="the run history (default as for check)")
    c = sub.add_parser("cache", help="the compile cache: where it is, its size and limit (info), or empty it (clear)",
                       epilog="the limit: FPDIFF_CACHE_MAX, in bytes or with a suffix (500M, 4G), 0 or off for none; "
                       "past it a build evicts the least recently used entries")
    c.add_argument("action", nargs="?", choices=("info", "clear"), default="info", help="default %(default)s")
    c.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="this folder (default: FPDIFF_CACHE, else ~/.cache/fpdiff)")
    c.add_argument("--json", metavar="PATH", help="write the answer as JSON here ('-': stdout, and nothing else)")
    w = sub.add_parser("worker", help="serve backend jobs to fpdiff on other machines (authenticated by a token)")
    w.add_argument("--listen", required=True, metavar="HOST:PORT", help="address to listen on (port 0: any free)")
    w.add_argument("--token-file", metavar="PATH", help="file holding the shared token (else FPDIFF_TOKEN)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fpdiff", description="Same numbers in every precision and on every backend?")
    p.add_argument("--version", action="version", version=_version())
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    p.add_argument("--keep-temp", action="store_true",
                   help="keep the run's temporary files (exported graphs, segments, worker logs) and print where")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for build in (_check_parser, _locate_parser, _ranges_parser, _plan_parser, _ops_parser, _fuzz_parser,
                  _other_parsers):
        build(sub)
    for command in sub.choices.values():  # before or after the subcommand; unset there, it keeps the global one's
        command.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    return p


def main(argv: list[str] | None = None) -> int:
    import warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # torch internals' deprecation chatter
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:  # answered before the parser imports torch
        print(_version())
        return 0
    args = parser().parse_args(argv)
    from fpdiff.runtime.rundir import run_directory
    try:
        with run_directory(keep=args.keep_temp):
            return _run(args)
    except FpdiffError as e:  # one line; its kind says the exit code (the user's input: 2, nothing judged: 3)
        if args.debug:
            raise
        print(f"fpdiff: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("fpdiff: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug of fpdiff's own: one line, the traceback with --debug
        if args.debug:
            raise
        text = " ".join(str(e).split())[:300]
        print(f"fpdiff: internal error in fpdiff: {type(e).__name__}: {text} (--debug shows the traceback)",
              file=sys.stderr)
        return EXIT_FAIL


def _run(args) -> int:
    if args.command in ("worker", "history", "diff", "report", "cache"):
        return {"worker": _worker, "history": _history, "diff": _history, "report": _report,
                "cache": _cache_command}[args.command](args)
    from fpdiff.backends import routes
    with routes.using(_routes(args)):  # this run's routes (the API's routes=), on top of fpdiff.toml
        if not _json_to_stdout(args):
            return COMMANDS[args.command](args, _console(sys.stdout, stderr=False))
        token = _JSON_OUT.set(sys.stdout)
        try:  # a print anywhere in the run (torch's own included) must not corrupt the JSON on stdout
            with contextlib.redirect_stdout(sys.stderr):
                return COMMANDS[args.command](args, _console(sys.stderr, stderr=True))
        finally:
            _JSON_OUT.reset(token)


def _json_to_stdout(args) -> bool:
    return getattr(args, "json", None) == JSON_STDOUT


def _console(stream, stderr: bool):
    """The console the results are shown on: stdout, or stderr when stdout carries the JSON report."""
    from rich.console import Console
    # piped or logged output: wide enough for the tables; a terminal keeps its own width
    return Console(stderr=stderr) if stream.isatty() else Console(stderr=stderr, width=160)


def _progress(args, what: str, unit: str = "cells"):
    """The analysis's progress display (on stderr, at a terminal); none with --quiet or when the JSON report goes to
    stdout (a script reading it wants nothing else from this run)."""
    from fpdiff.report.progress import display
    return display(what, unit, enabled=not args.quiet and not _json_to_stdout(args))


def _examples(args, console) -> int:
    from fpdiff.api import examples
    for name, doc in examples().items():
        console.print(f"[bold]example:{name}[/bold]  {doc}", highlight=False)
    return EXIT_OK


def _backends(args, console) -> int:
    from fpdiff.backends import registry
    reg = registry(args.plugin)
    for name in reg.names():
        cls = reg.cls(name)
        why = None if cls.route else reg.create(name).available()
        state = f"routed to {cls.route.where}" if cls.route else "available" if not why else "unavailable: " + why
        console.print(f"{name:10s} {state}", highlight=False)
    return EXIT_OK


def _worker(args) -> int:
    """Serve jobs until interrupted; refuses to start without a token (no unauthenticated code execution)."""
    from fpdiff.backends.routes import TOKEN_ENV, read_token
    from fpdiff.runtime.serve import listen
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--listen wants HOST:PORT, got {args.listen!r}")
    if not args.token_file and not os.environ.get(TOKEN_ENV):
        raise UsageError(f"a worker needs a shared token: --token-file PATH or {TOKEN_ENV} (anyone holding it can "
                         "run code here)")
    token = read_token(args.token_file, f"the worker on {args.listen}")
    try:
        listen(host.strip("[]"), int(port), token)
    except OSError as e:
        raise UsageError(f"cannot listen on {args.listen}: {e.strerror or e}") from None
    return EXIT_OK


def _cache_command(args) -> int:
    """fpdiff cache [info|clear]: the folder, its size and limit, or what emptying it freed."""
    from fpdiff.runtime import cache
    if args.action == "clear":
        done = cache.clear(args.cache_dir)
        data = done.as_dict()
        lines = [f"cleared {done.root}: freed {_size(done.bytes)} ({_entries(done.entries)})"]
        lines += [f"kept {_entries(done.kept)} being built by a running fpdiff"] if done.kept else []
    else:
        info = cache.cache_info(args.cache_dir)
        data = info.as_dict()
        lines = [f"cache: {info.root}", f"size: {_size(info.bytes)} in {_entries(info.entries)}",
                 f"limit: {_size(info.limit) if info.limit else 'none'} ({_limit_source(info.limit_from)})"]
    if args.json:
        _write_json(args.json, data)
    if not _json_to_stdout(args):
        print("\n".join(lines + ([f"JSON report: {args.json}"] if args.json else [])))
    return EXIT_OK


def _limit_source(source: str) -> str:
    from fpdiff.runtime.cache import LIMIT_ENV
    if source == LIMIT_ENV:
        return f"{LIMIT_ENV}={os.environ[LIMIT_ENV].strip()}"
    return f"the default; {LIMIT_ENV} sets another"


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _size(n: int) -> str:
    """Bytes in powers of 1024, as FPDIFF_CACHE_MAX reads them."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    value, unit = float(n), units.pop(0)
    while value >= 1024 and units:
        value, unit = value / 1024, units.pop(0)
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def _backend_flags(args) -> dict[str, list[str]]:
    """--backend-flag NAME=FLAG and --iree-flag FLAG, by backend, in the order given."""
    out: dict[str, list[str]] = {}
    for name, flag in args.backend_flag:
        out.setdefault(name, []).append(flag)
    return out


def _routes(args):
    """The routes the command line gives (--backend-python, --backend-host, --token-file), or None."""
    if not hasattr(args, "backend_python"):
        return None
    from fpdiff.backends import routes
    return routes.Routes(python=dict(routes.parse_assignment(a, "python") for a in args.backend_python),
                         host=dict(routes.parse_assignment(a, "host") for a in args.backend_host),
                         token_file=args.token_file)


def _runs(args) -> dict:
    """The API arguments of the shared groups a subcommand that runs backends has."""
    return {"plugins": tuple(args.plugin), "backend_flags": _backend_flags(args), "timeout": args.timeout,
            "seed": args.seed, "inputs": args.inputs, "shapes": dict(args.shape)}


def _check(args, console) -> int:
    from fpdiff import api
    with _progress(args, "loading the model") as progress:
        result = api.check(args.model, backends=args.backends, precisions=args.precisions,
                           devices=args.devices or [args.device], shape_variants=args.shape_variants,
                           allow_nonfinite=args.allow_nonfinite, repeat=args.repeat, keep_opset=args.keep_opset,
                           cache_dir=False if args.no_cache else args.cache_dir, artifacts=args.artifact,
                           progress=progress, **_runs(args))
    return _finish(args, console, result)


def _rejudge(args, console) -> int:
    from fpdiff import api
    return _finish(args, console, api.rejudge(args.run))


def _locate(args, console) -> int:
    from fpdiff import api
    repro = None if args.no_repro else (args.repro or f"fpdiff-out/repro-{args.backend}-{args.precision}")
    with _progress(args, f"locate {args.backend} {args.precision}", unit="") as progress:
        def step(what: str, done: int, total: int | None) -> None:  # locate names its step: ops, segments, ...
            progress(f"locate {args.backend} {args.precision}: {what}", done, total)
        result = api.locate(args.model, backend=args.backend, precision=args.precision, device=args.device,
                            mark_all=args.mark_all, shape_variant=args.shape_variant, repro=repro, progress=step,
                            artifact=args.artifact,
                            **_runs(args))
    return _finish(args, console, result, view={"top": args.top}, own_files=lambda: _locate_files(args, console,
                                                                                                    result))


def _locate_files(args, console, result) -> None:
    if result.repro:
        console.print(f"repro bundle: python {result.repro}", highlight=False)
    if args.model_explorer:
        from fpdiff.analysis.locate import LOCAL_FACTOR
        from fpdiff.core.precision import get
        from fpdiff.report import model_explorer
        p = get(result.precision)
        try:
            paths = model_explorer.write(result, args.model_explorer, LOCAL_FACTOR, p.unit_roundoff, p.tolerance)
        except OSError as e:
            raise UsageError(f"cannot write node data to {args.model_explorer}: {e.strerror or e}") from None
        console.print(f"Model Explorer node data: {', '.join(map(str, paths))}", highlight=False)


def _ranges(args, console) -> int:
    from fpdiff import api
    with _progress(args, "ranges: every float64 intermediate"):
        result = api.ranges(args.model, precisions=args.precision, seed=args.seed)
    return _finish(args, console, result, view={"show_all": args.all})


def _plan(args, console) -> int:
    from fpdiff import api
    with _progress(args, "planning: evidence, then trials", unit="evaluations") as progress:
        result = api.plan(args.model, precision=args.precision, backend=args.backend, tolerance=args.tolerance,
                          device=args.device, load=args.load, exports=args.export, export_onnx=args.export_onnx,
                          measure_speed=not args.no_speed, progress=progress, **_runs(args))
    return _finish(args, console, result, own_files=lambda: _save_plan(args, console, result))


def _save_plan(args, console, result) -> None:
    if args.save and result.passed:
        try:
            result.save(args.save)
        except OSError as e:
            raise UsageError(f"cannot write the plan to {args.save}: {e.strerror or e}") from None
        console.print(f"plan saved: {args.save}", highlight=False)


def _ops(args, console) -> int:
    from fpdiff import api
    if args.list_variants:
        from fpdiff.analysis.ops.variants import DEFAULT_VARIANTS, VARIANTS
        for name, v in VARIANTS.items():
            console.print(f"{name:16s} {'(default) ' if name in DEFAULT_VARIANTS else ''}{v.doc}", highlight=False)
        return EXIT_OK
    with _progress(args, "selecting cases", unit="cases") as progress:
        result = api.ops(catalogs=args.catalog, patterns=args.ops, variants=args.variants, backends=args.backends,
                         precisions=args.precisions, samples=args.samples, time_budget=args.time, ray=args.ray,
                         plugins=tuple(args.plugin), backend_flags=_backend_flags(args), timeout=args.timeout,
                         seed=args.seed, cache_dir=False if args.no_cache else args.cache_dir,
                         repro_dir=None if args.no_repro else args.repro_dir, progress=progress)
    return _finish(args, console, result, own_files=lambda: _save_table(args, console, result))


def _save_table(args, console, result) -> None:
    if args.save:
        result.save_table(args.save)  # a path it cannot write is its own one-line error
        console.print(f"support table: {args.save}", highlight=False)


def _fuzz(args, console) -> int:
    from fpdiff import api
    with _progress(args, "generating graphs", unit="graphs") as progress:
        result = api.fuzz(backends=args.backends, precisions=args.precisions, graphs=args.graphs,
                          time_budget=args.time, seed=args.seed, ops=args.ops, max_ops=args.max_ops,
                          forms=args.forms, ray=args.ray, plugins=tuple(args.plugin),
                          backend_flags=_backend_flags(args), timeout=args.timeout,
                          cache_dir=False if args.no_cache or not args.cache_dir else args.cache_dir,
                          repro_dir=None if args.no_repro else args.repro_dir, progress=progress)
    return _finish(args, console, result)


COMMANDS = {"check": _check, "locate": _locate, "ranges": _ranges, "plan": _plan, "ops": _ops, "fuzz": _fuzz,
            "examples": _examples, "backends": _backends, "rejudge": _rejudge}


def _finish(args, console, result, view: dict | None = None, own_files: Callable[[], None] | None = None) -> int:
    """The one path every analysis's result takes: shown first (a bad output path loses nothing), then its own
    files, the JSON, HTML and JUnit reports asked for, the history; the exit code is the result's."""
    from fpdiff.report import terminal
    terminal.show(result, console, **(view or {}))
    if own_files:
        own_files()
    if args.json:
        _write_json(args.json, result.as_dict())
        console.print(f"JSON report: {'stdout' if _json_to_stdout(args) else args.json}", highlight=False)
    if getattr(args, "junit", None):
        _write_junit(args, console, result)
    code = result.exit_code(strict=getattr(args, "strict", False))
    if args.html:
        from fpdiff.report.json_report import cleaned
        _write_html(args.html, cleaned(result.as_dict()))
        console.print(f"HTML report: {args.html}", highlight=False)
    if hasattr(args, "no_store") and not args.no_store:
        _store(args, console, result, code)
    return code


def _write_json(path: str, data: dict) -> None:
    from fpdiff.report.json_report import cleaned, dump
    if path == JSON_STDOUT:
        import json
        out = _JSON_OUT.get() or sys.stdout
        out.write(json.dumps(cleaned(data), indent=2) + "\n")
        out.flush()
        return
    try:
        dump(data, path)
    except OSError as e:
        raise UsageError(f"cannot write JSON to {path}: {e.strerror or e}") from None


def _write_junit(args, console, result) -> None:
    from fpdiff.report import junit
    try:
        junit.write(result, args.junit, strict=args.strict)
    except OSError as e:
        raise UsageError(f"cannot write JUnit XML to {args.junit}: {e.strerror or e}") from None
    console.print(f"JUnit XML: {args.junit}", highlight=False)


def _write_html(path: str, data: dict) -> None:
    from fpdiff.report import html
    text = html.render(data)  # a foreign report fails here, before anything is written
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    except OSError as e:
        raise UsageError(f"cannot write HTML to {path}: {e.strerror or e}") from None


def _store(args, console, result, code: int) -> None:
    """Record the run in the history (the command line it ran with, its exit code, its whole report)."""
    from fpdiff.report import store
    path = Path(args.store) if args.store else store.default_path()
    run = store.save_result(result, path, vars(args), code)
    console.print(f"stored as run {run} in {path} (fpdiff history, fpdiff diff)", highlight=False)


def _report(args) -> int:
    from fpdiff.report.json_report import load
    _write_html(args.output, load(args.json_file))
    print(f"HTML report: {args.output}")
    return EXIT_OK


def _history(args) -> int:
    import datetime

    from fpdiff.report import store
    path = Path(args.store) if args.store else store.default_path()
    if args.command == "history":
        for r in store.runs(path, args.model):
            when = datetime.datetime.fromtimestamp(r["started"]).strftime("%Y-%m-%d %H:%M")
            counts = " ".join(f"{k}={v}" for k, v in sorted(r["cells"].items()))
            print(f"{r['id']:5d}  {when}  {r['kind']:6s}  {r['model']}  exit {r['exit_code']}  {counts}")
        return EXIT_OK
    if not (args.run_a.isdigit() and args.run_b.isdigit()):  # two saved support tables (fpdiff ops --save)
        if args.run_a.isdigit() or args.run_b.isdigit():
            raise UsageError("fpdiff diff compares two stored runs (their ids) or two support tables (their files), "
                             f"not one of each: {args.run_a} {args.run_b}")
        t = store.diff_tables(Path(args.run_a), Path(args.run_b))
        print("\n".join(store.table_diff_lines(t)))
        return EXIT_FAIL if t["regressions"] else EXIT_OK
    d = store.diff(path, int(args.run_a), int(args.run_b))
    print(f"fpdiff diff {d['a']} {d['b']}: {d['model']}" + ("" if d["same_model_hash"] else " (the model changed)"))
    for k, (x, y) in d["versions"].items():
        print(f"  {k}: {x} -> {y}")
    for c in d["changed"]:
        err = ""
        if c.get("rel_l2_before") is not None and c.get("rel_l2_after") is not None:
            err = f"  rel L2 {c['rel_l2_before']:.2e} -> {c['rel_l2_after']:.2e}"
        print(f"  {c['kind']:11s} {c['cell']}: {c['before']} -> {c['after']}{err}")
    if not d["changed"]:
        print("  no cell changed its verdict, and no error grew beyond "
              f"{store.ERROR_GROWTH:g}x")
    return EXIT_FAIL if d["regressions"] else EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
