"""The wheel installs beside a user's stack: into a clean venv holding only torch, `pip install fpdiff` brings the core
dependencies and no backend compiler, the torch backend runs from it, and a backend whose package is missing says
which extra installs it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
# what the extras install; none of it may come with the core
EXTRAS_ONLY = {"onnxruntime", "iree-base-compiler", "iree-base-runtime", "iree-turbine", "openvino", "coremltools",
               "matplotlib", "transformers"}


def _run(cmd: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"{r.args}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    """A venv with torch==2.13.0 (the CPU wheel, installed first as `make install` does), then the fpdiff wheel and
    its core dependencies at constraints.txt's versions (so the run is reproducible; constraints add no package)."""
    root = tmp_path_factory.mktemp("packaging")
    _ok(_run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"),
              str(REPO)], cwd=root))
    wheel = next((root / "dist").glob("fpdiff-*.whl"))
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    pip = [str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _ok(_run([*pip, "torch==2.13.0"], cwd=root))
    _ok(_run([*pip, "-c", str(REPO / "constraints.txt"), str(wheel)], cwd=root))
    return root / "venv" / "bin"


def test_the_wheel_pulls_no_backend_compiler(clean):
    listed = _ok(_run([str(clean / "python"), "-m", "pip", "list", "--format=json"], cwd=clean)).stdout
    installed = {p["name"].lower() for p in json.loads(listed)}
    assert {"torch", "fpdiff", "onnx", "onnxscript", "numpy", "ml-dtypes", "rich"} <= {n.replace("_", "-")
                                                                                        for n in installed}
    assert not installed & EXTRAS_ONLY, sorted(installed & EXTRAS_ONLY)


def test_the_torch_backend_runs_from_the_wheel(clean, tmp_path):
    where = _ok(_run([str(clean / "python"), "-c", "import fpdiff; print(fpdiff.__file__)"], cwd=tmp_path)).stdout
    assert str(clean.parent) in where  # the installed wheel, not this checkout's sources
    r = _run([str(clean / "fpdiff"), "check", "example:tinycnn", "--backends", "torch", "--json", "out.json"],
             cwd=tmp_path)
    assert r.returncode in (0, 1), f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    cells = json.loads((tmp_path / "out.json").read_text())["cells"]
    assert cells and {c["backend"] for c in cells} == {"torch"}
    assert not [c for c in cells if c["status"] in ("error", "unsupported")], cells


def test_a_missing_backend_says_which_extra_installs_it(clean, tmp_path):
    r = _run([str(clean / "fpdiff"), "check", "example:tinycnn", "--backends", "ort", "--json", "out.json"],
             cwd=tmp_path)
    assert r.returncode != 0 and "Traceback" not in r.stderr, f"exit {r.returncode}\n{r.stderr[-3000:]}"
    cells = json.loads((tmp_path / "out.json").read_text())["cells"]
    assert cells and all(c["status"] == "unsupported" and "pip install 'fpdiff[ort]'" in c["reason"]
                         for c in cells), cells
    # the terminal says it as the JSON does (the brackets are text, not console markup)
    said = [line for line in (r.stdout + r.stderr).splitlines() if "pip install 'fpdiff[ort]'" in line]
    assert said, r.stdout[-3000:]
