"""Versions of the tools that produce and run artifacts: in reports, repro bundles and cache keys."""
from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

TOOLS = ("torch", "onnx", "onnxruntime", "onnxscript", "iree-base-compiler", "iree-base-runtime")


def versions(packages: tuple[str, ...] = ("fpdiff", *TOOLS)) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for pkg in packages:
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def report_versions() -> dict[str, str | None]:
    return {"python": platform.python_version(), **versions()}
