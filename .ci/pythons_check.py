"""Run by .ci/pythons in a venv holding the fpdiff wheel and its core dependencies, torch perhaps not: checks what
this Python can run of fpdiff and names what it skipped and why. Exits 1 on any failure."""
from __future__ import annotations

import compileall
import importlib
import importlib.metadata
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

# packages that only an extra installs: no fpdiff module may need one to be imported
EXTRAS_ONLY = {"onnxruntime", "iree", "openvino", "coremltools", "matplotlib"}
failures: list[str] = []


def ok(what: str) -> None:
    print(f"  ok       {what}")


def skipped(what: str, why: str) -> None:
    print(f"  skipped  {what}: {why}")


def failed(what: str, why: str) -> None:
    print(f"  FAILED   {what}: {why}")
    failures.append(what)


def module_names(package: Path) -> list[str]:
    """Every module of the installed package (folders without __init__.py, such as examples/, hold data), but
    __main__ (importing it runs the command line)."""
    names = []
    for p in sorted(package.rglob("*.py")):
        if p.name == "__main__.py":
            continue
        rel = p.relative_to(package.parent).with_suffix("")
        if all((package.parent / Path(*rel.parts[:i]) / "__init__.py").is_file() for i in range(1, len(rel.parts))):
            names.append(".".join(rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts))
    return names


def check_import_and_version() -> Path:
    import fpdiff
    heavy = sorted(m for m in ("torch", "onnx", "numpy") if m in sys.modules)
    if heavy:
        failed("import fpdiff", f"loads {', '.join(heavy)} (the API's names load on first use)")
    else:
        ok("import fpdiff (loads no torch, onnx or numpy)")
    installed = importlib.metadata.version("fpdiff")
    if fpdiff.__version__ == installed:
        ok(f"fpdiff.__version__ == {installed}")
    else:
        failed("fpdiff.__version__", f"{fpdiff.__version__!r}, the wheel is {installed!r}")
    return Path(fpdiff.__file__).parent


def check_compile(package: Path) -> None:
    if compileall.compile_dir(str(package), quiet=1, force=True, legacy=False):
        ok(f"byte-compiled every file of {package.name}/ with Python {sys.version.split()[0]}")
    else:
        failed("byte-compile", "a file does not compile on this Python (above)")


def check_modules(package: Path, have_torch: bool) -> None:
    imported, need_torch = [], []
    for name in module_names(package):
        try:
            importlib.import_module(name)
            imported.append(name)
        except ModuleNotFoundError as e:
            root = (e.name or "").split(".")[0]
            if root == "torch" and not have_torch:
                need_torch.append(name)
            elif root in EXTRAS_ONLY:
                failed(f"import {name}", f"needs {root} at import time, which only an extra installs")
            else:
                failed(f"import {name}", f"{type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - any other failure to import is the finding
            failed(f"import {name}", f"{type(e).__name__}: {e}")
    ok(f"imported {len(imported)} modules: {', '.join(imported)}")
    if need_torch:
        skipped(f"importing {len(need_torch)} modules", f"they import torch, not here: {', '.join(need_torch)}")


def check_routes_toml(package: Path, have_torch: bool) -> None:
    """fpdiff.toml through backends/routes.py (tomli before 3.11). Without torch, routes.py is loaded from its file
    (the backends package imports torch); when routes.py itself needs torch, only its TOML parser is checked."""
    parser = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    sample = '[backends."ort@1.20"]\npython = "/usr/bin/python3"\n'
    try:
        routes = importlib.import_module("fpdiff.backends.routes") if have_torch else _from_file(package)
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        read = importlib.import_module(parser).loads(sample)["backends"]["ort@1.20"]["python"]
        ok(f"{parser} (what backends/routes.py reads fpdiff.toml with here) imports and reads one: {read}")
        skipped("backends/routes.py on fpdiff.toml", "it imports torch")
        return
    with tempfile.TemporaryDirectory() as d:
        Path(d, "fpdiff.toml").write_text(sample)
        got = routes.active(Path(d))
    if got.get("ort@1.20") and got["ort@1.20"].python == "/usr/bin/python3":
        ok(f"backends/routes.py reads fpdiff.toml ({parser})")
    else:
        failed("backends/routes.py", f"read {got!r} from fpdiff.toml")


def _from_file(package: Path):
    spec = importlib.util.spec_from_file_location("fpdiff_routes_check", package / "backends" / "routes.py")
    assert spec and spec.loader
    routes = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = routes  # its dataclasses look their module up
    spec.loader.exec_module(routes)
    return routes


def check_cli_version() -> None:
    fpdiff_cmd = Path(sys.executable).parent / "fpdiff"
    r = subprocess.run([str(fpdiff_cmd), "--version"], capture_output=True, text=True, timeout=120)
    want = f"fpdiff {importlib.metadata.version('fpdiff')}"
    if r.returncode == 0 and r.stdout.strip() == want:
        ok(f"fpdiff --version: {want}")
    else:
        failed("fpdiff --version", f"exit {r.returncode}: {(r.stdout + r.stderr).strip()[-300:]}")


def main() -> int:
    have_torch = importlib.util.find_spec("torch") is not None
    package = check_import_and_version()
    check_compile(package)
    check_routes_toml(package, have_torch)
    check_modules(package, have_torch)
    check_cli_version()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
