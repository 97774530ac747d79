"""Versions of the tools that produce and run artifacts: in reports, repro bundles and cache keys. A report lists
the tools every run uses and the distributions behind the modules its backends require (backends declare
`requires`), so a backend that ran is never missing from the table."""
from __future__ import annotations

import functools
import platform
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions, version

CORE = ("torch", "onnx", "onnxscript")  # the model's framework, the graph format, the exporter
TOOLS = (*CORE, "onnxruntime", "iree-base-compiler", "iree-base-runtime", "openvino", "coremltools")


def versions(packages: Iterable[str] = ("fpdiff", *TOOLS)) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


@functools.cache
def fpdiff_version() -> str:
    """fpdiff's own version, here so that any layer can say it: the installed distribution's; in a source tree never
    installed, the one pyproject.toml declares."""
    try:
        return version("fpdiff")
    except PackageNotFoundError:
        import re
        from pathlib import Path
        pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
        found = re.search(r'^version\s*=\s*"([^"]+)"', pyproject.read_text(), re.M) if pyproject.is_file() else None
        return found.group(1) if found else "0+unknown"


@functools.cache
def _top_level() -> dict[str, list[str]]:
    return dict(packages_distributions())


def distributions(modules: Iterable[str]) -> list[str]:
    """The installed distributions that provide these modules: `iree.compiler` -> iree-base-compiler (the one whose
    files hold that package, when several share the top-level name), `openvino` -> openvino."""
    out: list[str] = []
    for module in modules:
        names = _top_level().get(module.split(".")[0], [])
        folder = module.replace(".", "/") + "/"
        exact = [d for d in names if any(str(f).startswith(folder) for f in distribution(d).files or ())]
        out += exact or names
    return list(dict.fromkeys(out))


def report_versions(modules: Iterable[str] | None = None) -> dict[str, str | None]:
    """Python, fpdiff and its tools. `modules`: what the run's backends require (their distributions are listed,
    and only those besides CORE); None: every tool fpdiff knows of."""
    packages = TOOLS if modules is None else (*CORE, *distributions(modules))
    return {"python": platform.python_version(), **versions(("fpdiff", *dict.fromkeys(packages)))}
