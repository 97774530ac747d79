"""Backends that run elsewhere: in another Python interpreter (another torch, ORT or IREE; IPEX) or on another machine
(a Mac for Core ML, a GPU box). A route names the backend fpdiff shows (`ort@1.20`), the backend the worker runs
(`ort`), and where the worker is. Routes come from `fpdiff.toml` in the working directory and from the command line
(`--backend-python NAME=PYTHON`, `--backend-host NAME=HOST:PORT`), the command line winning."""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, published before it joined the standard library
    import tomli as tomllib

from fpdiff.core.errors import UsageError
from fpdiff.core.task import ONNX, TORCH

CONFIG_FILE = "fpdiff.toml"
TOKEN_ENV = "FPDIFF_TOKEN"  # the shared token for remote workers, when no token file is named


@dataclass(frozen=True)
class Route:
    name: str  # as fpdiff shows it: ort@1.20, coreml, ipex
    base: str  # the worker's own name for the backend: ort, coreml, ipex
    python: str | None = None  # an interpreter whose fpdiff runs the jobs (stdio)
    host: str | None = None  # HOST:PORT of `fpdiff worker --listen`
    token_file: str | None = None
    declarations: dict = field(default_factory=dict, compare=False)  # kinds etc. when the base is not known here

    @property
    def where(self) -> str:
        return f"python {self.python}" if self.python else f"worker {self.host}"

    def token(self) -> bytes:
        return read_token(self.token_file, f"{self.name} runs on {self.host}")


def read_token(token_file: str | None, who: str) -> bytes:
    """The shared token: the file's, else FPDIFF_TOKEN; never empty (`who` needs it, said when it is missing)."""
    if token_file:
        path = Path(token_file).expanduser()
        try:
            text = path.read_text().strip()
        except OSError as e:
            raise UsageError(f"cannot read the token file for {who}: {path} ({e.strerror})") from None
    else:
        text = os.environ.get(TOKEN_ENV, "").strip()
    if not text:
        raise UsageError(f"{who}: give a token (token_file in {CONFIG_FILE}, --token-file, or {TOKEN_ENV})")
    return text.encode()


_explicit: dict[str, Route] = {}
# the routes one analysis run was given (Routes, `using`): they hold for that run only, on top of the process's
_run: contextvars.ContextVar[dict[str, Route] | None] = contextvars.ContextVar("fpdiff_routes", default=None)


@dataclass(frozen=True)
class Routes:
    """Where backends run for one analysis run: another interpreter or a worker host, by the backend name fpdiff
    shows (`ort@1.20`), on top of fpdiff.toml; the API's `routes=` and the CLI's --backend-python/--backend-host."""
    python: Mapping[str, str] = field(default_factory=dict)
    host: Mapping[str, str] = field(default_factory=dict)
    token_file: str | None = None

    def built(self) -> dict[str, Route]:
        """Each route, its address checked (a malformed one is one line)."""
        out = {name: Route(name, _base(name), python=exe) for name, exe in self.python.items()}
        for name, addr in self.host.items():
            _check_addr(name, addr)
            out[name] = Route(name, _base(name), host=addr, token_file=self.token_file)
        return out


@contextlib.contextmanager
def using(given: Routes | None) -> Iterator[None]:
    """`given` in force for what runs inside (one analysis run), without touching other runs of the process."""
    token = _run.set(given.built() if given else None)
    try:
        yield
    finally:
        _run.reset(token)


def configure(python: dict[str, str] | None = None, host: dict[str, str] | None = None,
              token_file: str | None = None) -> None:
    """Routes for this process, on top of fpdiff.toml (a run's own, `using`, go on top of these)."""
    _explicit.clear()
    _explicit.update(Routes(python or {}, host or {}, token_file).built())


def parse_assignment(text: str, what: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name or not value:
        raise UsageError(f"--backend-{what} wants NAME={'PYTHON' if what == 'python' else 'HOST:PORT'}, got {text!r}")
    return name.strip(), value.strip()


def active(cwd: Path | None = None) -> dict[str, Route]:
    """Every route in force: fpdiff.toml's, then this process's own."""
    routes = _from_file((cwd or Path.cwd()) / CONFIG_FILE)
    routes.update(_explicit)
    routes.update(_run.get() or {})
    return routes


def _base(name: str) -> str:
    return name.split("@", 1)[0]


def _check_addr(name: str, addr: str) -> None:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"{name}: a worker address is HOST:PORT, got {addr!r}")


def _from_file(path: Path) -> dict[str, Route]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path} is not valid TOML: {e}") from None
    routes = {}
    for name, entry in (data.get("backends") or {}).items():
        if not isinstance(entry, dict) or bool(entry.get("python")) == bool(entry.get("host")):
            raise UsageError(f"{path}: [backends.\"{name}\"] needs exactly one of python = ... or host = ...")
        python = entry.get("python")
        if python and ("/" in python or python.startswith(".")):
            python = str((path.parent / python).expanduser())  # relative to the file, like a lock file's paths
        if entry.get("host"):
            _check_addr(name, entry["host"])
        token_file = entry.get("token_file")
        if token_file:
            token_file = str(path.parent / Path(token_file).expanduser())  # absolute paths stay as they are
        decl = _declarations(path, name, entry)
        routes[name] = Route(name, entry.get("base", _base(name)), python=python, host=entry.get("host"),
                             token_file=token_file,
                             declarations=decl)
    return routes


# What a [backends."NAME"] table may hold: where the worker is, and the declarations of a backend unknown here.
WHERE = ("python", "host", "token_file", "base")
DECLARATIONS: dict[str, type] = {"kinds": list, "shape_variants": bool, "takes_flags": bool}
KINDS = (TORCH, ONNX)


def _declarations(path: Path, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The route's declarations; a key fpdiff would not read (a typo: `shape_variant = false`) or a value of the
    wrong type is a UsageError naming what it may hold."""
    where = f"{path}: [backends.\"{name}\"]"
    for key, value in entry.items():
        if key not in WHERE and key not in DECLARATIONS:
            raise UsageError(f"{where} has {key!r}, which is no route setting; known: "
                             f"{', '.join([*WHERE, *DECLARATIONS])}")
        if key in DECLARATIONS and not isinstance(value, DECLARATIONS[key]):
            raise UsageError(f"{where}: {key} must be a {DECLARATIONS[key].__name__}, got {value!r}")
    if not set(entry.get("kinds", [])) <= set(KINDS):
        raise UsageError(f"{where}: kinds are {', '.join(KINDS)}, got {entry['kinds']!r}")
    return {k: entry[k] for k in DECLARATIONS if k in entry}
