"""Command line: parses, calls the API, prints. fpdiff's own errors are one line each, the exit code by kind: the
user's input 2; a float64 reference that cannot run or a model an analysis cannot take 3 (nothing judged).

Every analysis is a subcommand made from its declaration (fpdiff.analyses): its own arguments and the shared groups of
the options it reads; one run path (`_analysis`) makes its options, calls it and hands the result to `_finish`: the
terminal, its files, JSON, HTML, JUnit, the history and the exit code, each by the analysis's declaration."""
from __future__ import annotations

import argparse
import contextlib
import contextvars
import os
import sys
from collections.abc import Callable
from pathlib import Path

from fpdiff.analyses import args as cli_args
from fpdiff.core.errors import FpdiffError, UsageError

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
QUIET_HELP = "show no progress (it goes to stderr, and only when stderr is a terminal)"
JSON_STDOUT = "-"  # --json -: the JSON report is stdout's only content
# where `--json -` writes: the real stdout, while anything else printed during the run goes to stderr
_JSON_OUT: contextvars.ContextVar = contextvars.ContextVar("fpdiff_json_out", default=None)


def _version() -> str:
    import fpdiff
    found = getattr(fpdiff, "__version__", None)
    if found is None:
        from importlib.metadata import version
        found = version("fpdiff")
    return f"fpdiff {found}"



def _analysis_parser(sub, a) -> None:
    """An analysis's subcommand: the shared groups of the options it reads, then its own arguments."""
    p = sub.add_parser(a.name, help=a.summary, parents=cli_args.shared(*cli_args.groups_for(a.shared, a.cli_groups)),
                       epilog=a.epilog() if a.epilog else None)
    if a.takes_model:
        p.add_argument("model", help=a.model_help)
    if a.arguments:
        a.arguments(p)
    if "timeout" in a.defaults:
        p.set_defaults(timeout=a.defaults["timeout"])


def _other_parsers(sub) -> None:
    sub.add_parser("examples", help="list the built-in example models")
    sub.add_parser("backends", help="list registered backends and whether they are available",
                   parents=cli_args.shared("plugins", "routes"))
    rj = sub.add_parser("rejudge", help="a stored check, ops or fuzz --json report judged again by this fpdiff's "
                        "rules, from the evidence it kept (no backend runs)", parents=cli_args.shared("reports"),
                        epilog="exit as for the analysis that wrote it, by the verdicts judged again; the cells whose "
                        "verdict changed and any rule the stored run lacks the evidence for are listed")
    rj.add_argument("run", metavar="RUN.json", help="a check, ops or fuzz report written with --json")
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
    pub = sub.add_parser("publish", help="a searchable HTML page and a Markdown summary of support tables: per "
                         "backend and version, each op's support and error at each precision")
    pub.add_argument("tables", nargs="+", metavar="TABLE.json",
                     help="support tables (fpdiff ops --save) or ops reports (--json); of one sweep at two versions, "
                     "oldest first, the page says what the newer gained and lost")
    pub.add_argument("--out", required=True, metavar="DIR", help="the folder to write index.html, SUPPORT.md "
                     "and support.json (the page's rows, which publish reads again) in")
    pub.add_argument("--title", metavar="T", help="the page's title (default: the sweeps' names)")
    pub.add_argument("--findings", metavar="DIR", help="a folder of triaged reports (a subfolder each, with its "
                     "finding.json): a row of their op and backend links its report, a failing row without one says "
                     "'not triaged'")
    pub.add_argument("--finding-url", metavar="URL", help="the link to a report, {folder} its subfolder (default: its "
                     "REPORT.md, relative to --out)")
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
    p = cli_args.Parser(prog="fpdiff", description="Same numbers in every precision and on every backend?")
    p.add_argument("--version", action="version", version=_version())
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    p.add_argument("--keep-temp", action="store_true",
                   help="keep the run's temporary files (exported graphs, segments, worker logs) and print where")
    sub = p.add_subparsers(dest="command", required=True, parser_class=cli_args.Parser)
    from fpdiff import analyses
    for a in analyses.all_analyses():
        _analysis_parser(sub, a)
    _other_parsers(sub)
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
    if args.command in ("worker", "history", "diff", "report", "cache", "publish"):
        return {"worker": _worker, "history": _history, "diff": _history, "report": _report,
                "cache": _cache_command, "publish": _publish}[args.command](args)
    from fpdiff.backends import routes
    with routes.using(cli_args.routes(args)):  # this run's routes (the API's routes=), on top of fpdiff.toml
        if not _json_to_stdout(args):
            return _command(args)(args, _console(sys.stdout, stderr=False))
        token = _JSON_OUT.set(sys.stdout)
        try:  # a print anywhere in the run (torch's own included) must not corrupt the JSON on stdout
            with contextlib.redirect_stdout(sys.stderr):
                return _command(args)(args, _console(sys.stderr, stderr=True))
        finally:
            _JSON_OUT.reset(token)


def _command(args) -> Callable:
    """What runs a command that shows its answer on the console: an analysis, or examples, backends, rejudge."""
    return {"examples": _examples, "backends": _backends, "rejudge": _rejudge}.get(args.command, _analysis)


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
    for name, doc in examples.names().items():
        console.print(f"[bold]example:{name}[/bold]  {doc}", highlight=False)
    return EXIT_OK


def _backends(args, console) -> int:
    from fpdiff.backends import registry
    reg = registry(args.plugin)
    for name in reg.names():
        cls = reg.cls(name)
        backend = None if cls.route else reg.create(name)
        why = backend.available() if backend else None
        reach = backend.reach() if backend and not why else None
        state = f"routed to {cls.route.where}" if cls.route else "unavailable: " + why if why else \
            f"available; {reach}" if reach else "available"
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


def _analysis(args, console) -> int:
    """One analysis from the command line: its options, the shared ones, its run, then _finish."""
    from fpdiff import analyses
    a = analyses.get(args.command)
    if a.before is not None:
        answered = a.before(args, console)
        if answered is not None:
            return answered
    options = a.options_from(args)
    values = cli_args.shared_values(args, a.shared, dict(a.defaults))
    with _progress(args, a.progress_label, unit=a.progress_unit) as display:
        if "progress" in a.shared:
            values["progress"] = a.progress(args, display) if a.progress else display
        result = a.start(getattr(args, "model", None), options, a.shared_options(**values))
    return _finish(args, console, result, view=a.view(args) if a.view else None,
                   own_files=(lambda: a.files(args, console, result)) if a.files else None)


def _rejudge(args, console) -> int:
    from fpdiff import api
    return _finish(args, console, api.rejudge(args.run))


def _finish(args, console, result, view: dict | None = None, own_files: Callable[[], None] | None = None) -> int:
    """The one path every analysis's result takes: shown first (a bad output path loses nothing), then its own
    files, the JSON, HTML and JUnit reports asked for, the history; the exit code is the result's."""
    from fpdiff import analyses
    analyses.show(result, console, **(view or {}))
    if own_files:
        own_files()
    if args.json:
        _write_json(args.json, {**result.as_dict(), "command": command_line()})
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


def command_line() -> str:
    """The command as typed, quoted so it runs again (a report records what made it: a published table shows it)."""
    import shlex
    return "fpdiff " + shlex.join(sys.argv[1:])


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
    from fpdiff import analyses
    from fpdiff.report import junit
    tree = analyses.junit_suite(result, strict=getattr(args, "strict", False))
    try:
        junit.write(tree, args.junit)
    except OSError as e:
        raise UsageError(f"cannot write JUnit XML to {args.junit}: {e.strerror or e}") from None
    console.print(f"JUnit XML: {args.junit}", highlight=False)


def _write_html(path: str, data: dict) -> None:
    from fpdiff import analyses
    text = analyses.html_page(data)  # a foreign report fails here, before anything is written
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    except OSError as e:
        raise UsageError(f"cannot write HTML to {path}: {e.strerror or e}") from None


def _store(args, console, result, code: int) -> None:
    """Record the run in the history (the command line it ran with, its exit code, its whole report)."""
    from fpdiff import analyses
    from fpdiff.report import store
    path = Path(args.store) if args.store else store.default_path()
    run = store.save_result(result, path, vars(args), code, analyses.get(result.kind).cells)
    console.print(f"stored as run {run} in {path} (fpdiff history, fpdiff diff)", highlight=False)


def _report(args) -> int:
    from fpdiff.report.json_report import load
    _write_html(args.output, load(args.json_file))
    print(f"HTML report: {args.output}")
    return EXIT_OK


def _publish(args) -> int:
    """fpdiff publish TABLE.json ... --out DIR: the page and the Markdown summary, and where they are."""
    from fpdiff.report.support_page import publish
    for what, path in publish(args.tables, args.out, title=args.title, findings=args.findings,
                              finding_url=args.finding_url).items():
        print(f"{what}: {path}")
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
    from fpdiff import analyses
    d = store.diff(path, int(args.run_a), int(args.run_b), analyses.compared_kinds())
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
