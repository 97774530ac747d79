"""The command line's shared vocabulary: argument types, and the option groups that map to the shared options
(RunOptions), one meaning each in every subcommand that has them."""
from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        self.exit(2, f"fpdiff: error: {message}\n")


def csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def precision_names(text: str) -> list[str]:
    """A comma list of precisions, each as its name here (torch's names taken: float16, bfloat16, half)."""
    return [precision_name(t) for t in csv(text)]


def precision_name(text: str) -> str:
    from fpdiff.core.errors import UsageError
    from fpdiff.core.precision import canonical
    try:
        return canonical(text)
    except UsageError as e:  # argparse's own one line and exit 2
        raise argparse.ArgumentTypeError(str(e)) from None


def precision_or_format(text: str) -> str:
    """A float precision (as precision_name) or a quantized format by its name (int8, int4-weight, fp8, ...)."""
    from fpdiff.core.precision import QUANTIZED
    low = text.strip().lower()
    return low if low in QUANTIZED else precision_name(text)


def shape(text: str) -> tuple[str, list[int]]:
    name, _, dims = text.partition("=")
    try:
        values = [int(d) for d in dims.split(",")] if dims else []
    except ValueError:
        values = []
    if not name or not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"--shape wants NAME=D0,D1,... with integers, got {text!r}")
    return name, values


def duration(text: str) -> float:
    """90, 90s, 10m, 2h: seconds."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"a duration is like 90s, 10m or 2h, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def grid(p: argparse.ArgumentParser, backends: tuple[str, ...], precisions: tuple[str, ...]) -> None:
    """--backends and --precisions of an analysis that sweeps a grid, with its defaults."""
    p.add_argument("--backends", type=csv, default=list(backends), help=f"comma list (default {','.join(backends)})")
    p.add_argument("--precisions", "--precision", dest="precisions", type=precision_names, default=list(precisions),
                   help=f"comma list (default {','.join(precisions)})")


def sweep(p: argparse.ArgumentParser, time_help: str, repro_dir: str) -> None:
    """What a sweep without a model shares: its time budget, Ray, where repros go."""
    p.add_argument("--time", type=duration, default=None, metavar="BUDGET", help=time_help)
    p.add_argument("--ray", metavar="ADDRESS", help="spread batches over a Ray cluster ('local' starts one)")
    p.add_argument("--repro-dir", default=repro_dir, help="where failures' repros go (default %(default)s)")
    p.add_argument("--no-repro", action="store_true", help="write no repro")
    p.add_argument("--resume", metavar="RUN.json", default=None,
                   help="continue a cut run from its JSON report (--json): what it judged is kept, not rerun")


def repro_dir(args: argparse.Namespace) -> str | None:
    return None if args.no_repro else args.repro_dir


def _backend_flag(text: str) -> tuple[str, str]:
    name, _, flag = text.partition("=")
    if not name.strip() or not flag:
        raise argparse.ArgumentTypeError(f"--backend-flag wants NAME=FLAG (iree=--iree-opt-level=O3), got {text!r}")
    return name.strip(), flag


def _iree_flag(text: str) -> tuple[str, str]:
    return "iree", text  # --iree-flag FLAG is --backend-flag iree=FLAG


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
    p.add_argument("--inputs", help="npz with one array per input, by name (an ONNX model, a .pt2, an hf: "
                   "checkpoint)")
    p.add_argument("--shape", type=shape, action="append", default=[], metavar="NAME=D0,D1",
                   help="shape of an ONNX input with symbolic dims (repeatable)")


def _task(p: argparse.ArgumentParser) -> None:
    from fpdiff.sources.hf import TASKS
    p.add_argument("--task", metavar="TASK", help="the class of a Hugging Face checkpoint (hf:DIR): "
                   f"{', '.join(TASKS)}, or a transformers class (AutoModelForCausalLM); default: the config's "
                   "architecture")


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


def _junit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--junit", metavar="PATH", help="write JUnit XML here: one testcase per cell, for CI")


def _history(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH", help="the run history (default: FPDIFF_STORE, else "
                   "~/.local/share/fpdiff/history.sqlite)")
    p.add_argument("--no-store", action="store_true", help="do not record this run in the history")


GROUPS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "plugins": _plugins, "flags": _flags, "timeout": _timeout, "cache": _cache, "seed": _seed, "device": _device,
    "inputs": _inputs, "task": _task, "routes": _routes, "reports": _reports, "junit": _junit, "store": _history}
# the command-line group of each shared option (RunOptions field); progress has none (the display is the CLI's)
GROUP_OF = {"plugins": "plugins", "backend_flags": "flags", "timeout": "timeout", "seed": "seed",
            "cache_dir": "cache", "inputs": "inputs", "shapes": "inputs", "task": "task", "routes": "routes"}


def shared(*names: str) -> list[argparse.ArgumentParser]:
    """The shared option groups by name, as argparse parents."""
    out = []
    for n in names:
        p = Parser(add_help=False)
        GROUPS[n](p)
        out.append(p)
    return out


def groups_for(shared_fields: tuple[str, ...], extra: tuple[str, ...]) -> list[str]:
    """The command-line groups of an analysis: those of the shared options it reads, its extra ones, the reports."""
    names = [GROUP_OF[f] for f in shared_fields if f in GROUP_OF] + list(extra) + ["reports"]
    return list(dict.fromkeys(names))


def backend_flags(args: argparse.Namespace) -> dict[str, list[str]]:
    """--backend-flag NAME=FLAG and --iree-flag FLAG, by backend, in the order given."""
    out: dict[str, list[str]] = {}
    for name, flag in args.backend_flag:
        out.setdefault(name, []).append(flag)
    return out


def routes(args: argparse.Namespace):
    """The routes the command line gives (--backend-python, --backend-host, --token-file), or None."""
    if not hasattr(args, "backend_python"):
        return None
    from fpdiff.backends import routes as r
    return r.Routes(python=dict(r.parse_assignment(a, "python") for a in args.backend_python),
                    host=dict(r.parse_assignment(a, "host") for a in args.backend_host),
                    token_file=args.token_file)


def shared_values(args: argparse.Namespace, fields: tuple[str, ...], defaults: dict) -> dict[str, Any]:
    """The shared options (RunOptions fields) the command line gives for `fields`."""
    read: dict[str, Callable[[], Any]] = {
        "plugins": lambda: tuple(args.plugin), "backend_flags": lambda: backend_flags(args),
        "timeout": lambda: args.timeout, "seed": lambda: args.seed, "inputs": lambda: args.inputs,
        "shapes": lambda: dict(args.shape), "task": lambda: args.task, "routes": lambda: routes(args),
        "cache_dir": lambda: False if args.no_cache else
        (args.cache_dir if args.cache_dir is not None else defaults.get("cache_dir"))}
    return {f: read[f]() for f in fields if f in read}
