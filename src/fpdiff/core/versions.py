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
    """Python, fpdiff and its tools, and the CPU. `modules`: what the run's backends require (their distributions
    are listed, and only those besides CORE); None: every tool fpdiff knows of."""
    packages = TOOLS if modules is None else (*CORE, *distributions(modules))
    return {"python": platform.python_version(), **versions(("fpdiff", *dict.fromkeys(packages))), "cpu": cpu()}


# The instruction sets that decide what a CPU computes a narrow format in: OpenVINO's CPU plugin runs a bf16 or f16
# hint natively only with them (and in f32 without), oneDNN and inductor pick kernels by them. /proc/cpuinfo's flag
# -> the name a reader knows.
ISA = {"avx2": "AVX2", "fma": "FMA", "f16c": "F16C", "avx512f": "AVX512F", "avx512_vnni": "AVX512-VNNI",
       "avx512_bf16": "AVX512-BF16", "avx512_fp16": "AVX512-FP16", "amx_tile": "AMX", "amx_bf16": "AMX-BF16",
       "amx_fp16": "AMX-FP16", "asimd": "NEON", "asimdhp": "NEON-FP16", "bf16": "BF16", "sve": "SVE"}


@functools.cache
def cpu() -> str:
    """The CPU a result holds on: its model and the instruction sets of ISA it has and lacks ("AMD EPYC (x86_64):
    AVX2, ..., AVX512-BF16; no AVX512-FP16, AMX"), since a narrow format's numbers can depend on them."""
    model, flags = _cpuinfo()
    arch = platform.machine() or "unknown"
    if not flags:
        return f"{model or platform.processor() or 'unknown CPU'} ({arch})"
    x86 = arch.lower() in ("x86_64", "amd64", "i686", "i386")
    known = [k for k in ISA if (k in ("avx2", "fma", "f16c") or k.startswith(("avx512", "amx"))) == x86]
    has = [ISA[k] for k in known if k in flags]
    lacks = [ISA[k] for k in known if k not in flags]
    return f"{model or 'CPU'} ({arch}): {', '.join(has) or 'none of ' + ', '.join(ISA[k] for k in known)}" + (
        f"; no {', '.join(lacks)}" if lacks and has else "")


def _cpuinfo() -> tuple[str, set[str]]:
    """The model name and the flags /proc/cpuinfo gives (Linux); ("", set()) elsewhere."""
    try:
        text = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read()
    except OSError:
        return "", set()
    model, flags = "", set[str]()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and not model:
            model = " ".join(value.split())
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return model, flags
