"""Repro bundles: one script that shows the difference without fpdiff, for each kind of backend."""
import subprocess
import sys
from pathlib import Path

import pytest

import fpdiff
from conftest import PLUGINS, SPECS
from fpdiff.core.status import Status

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast


def run_script(path: str, tmp_path: Path):
    text = Path(path).read_text()
    assert "fpdiff" not in "\n".join(ln for ln in text.splitlines() if "import" in ln)
    return subprocess.run([sys.executable, path], capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_plugin_mismatch_bundle_reproduces(tmp_path):
    r = fpdiff.locate("example:tinyformer", backend="perturb", precision="fp32",
                      plugins=(str(PLUGINS / "perturb.py"),), repro=str(tmp_path / "b"))
    files = {p.name for p in (tmp_path / "b").iterdir()}
    assert {"segment.pt2", "inputs.npz", "expected.npz", "backend_output.npz", "meta.json", "repro.py",
            "perturb.py"} <= files
    p = run_script(r.repro, tmp_path)
    assert p.returncode == 1, p.stderr
    assert "relative L2 vs float64 = 1.0" in p.stdout


def test_torch_precision_culprit_bundle_shows_the_overflow(tmp_path):
    r = fpdiff.locate("example:rmsnorm", precision="fp16", repro=str(tmp_path / "b"))
    p = run_script(r.repro, tmp_path)
    assert p.returncode == 1 and "non-finite" in p.stdout and "= inf" in p.stdout


def test_ort_refusal_is_narrowed_to_the_op_and_reproduced_with_onnxruntime_alone(tmp_path):
    r = fpdiff.locate(str(SPECS / "scatter_add_pool.py"), backend="ort", precision="fp16", repro=str(tmp_path / "b"))
    assert r.segment.ops == ["aten.index_add.default"] and r.segment.status == Status.UNSUPPORTED
    assert (tmp_path / "b" / "segment.onnx").exists()
    f = r.findings[0]
    assert f.kind == Status.UNSUPPORTED and f.op == "aten.index_add.default" and r.repro in f.remedy
    p = run_script(r.repro, tmp_path)
    assert p.returncode != 0 and "ScatterND" in p.stderr


def test_iree_demoted_f64_failure_is_reproduced_with_the_iree_runtime_alone(tmp_path):
    r = fpdiff.locate(str(SPECS / "f64_mul.py"), backend="iree", precision="fp64",
                      iree_flags=("--iree-input-demote-f64-to-f32=true",), repro=str(tmp_path / "b"))
    assert r.segment is not None and r.segment.end - r.segment.start == 1
    assert (tmp_path / "b" / "segment.vmfb").exists()
    p = run_script(r.repro, tmp_path)
    assert p.returncode != 0 and "OUT_OF_RANGE" in p.stderr
