"""Repro bundles of failing op cells: written from the cell's own job, rerun in a fresh process, counted as
re-triggered only when the backend itself shows the failure again (real backends, planted bugs in plugin backends)."""
import copy
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import PLUGINS
from fpdiff.analysis.ops import repro
from fpdiff.analysis.ops.case import OpsCell
from fpdiff.backends import registry
from fpdiff.core.status import Status
from fpdiff.core.versions import report_versions
from fpdiff.judging.grid import GridSettings, make_grid

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast

PERTURB, MISBEHAVE = str(PLUGINS / "perturb.py"), str(PLUGINS / "misbehave.py")
LINEAR_SPEC = '''import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 16)  # 16 output features: the width perturb.py corrupts
    def forward(self, x):
        return self.lin(x)
def model():
    return M()
def inputs():
    return (torch.randn(4, 8, dtype=torch.float64),)
'''


def job_for(model: str, backend: str, precision: str, plugins=(), flags=(), **load_args):
    settings = GridSettings((backend,), (precision,), plugins=tuple(plugins), flags={backend: flags} if flags else {},
                            cache_dir=False, load_args=load_args)
    grid = make_grid(model, registry(plugins), settings)
    return grid.job(grid.cells[0])


def run_backend(job) -> list[np.ndarray]:
    """The cell's outputs, run as a worker runs it (prepare_task on the rebuilt task)."""
    task = repro.task_of(job)
    outs = registry(job.plugins).create(job.backend).prepare_task(task).run(*task.inputs())
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return [o.detach().float().numpy() if isinstance(o, torch.Tensor) else np.asarray(o) for o in outs]


def cell(job, op: str, catalog: str, status: str = "mismatch", reason: str = "") -> OpsCell:
    return OpsCell(op=op, catalog=catalog, variant="sample", case=f"{op}#0", family=op, backend=job.backend,
                   device="cpu", precision=job.precision.name, shape_variant="static", status=status, reason=reason)


def run_script(path):
    text = path.read_text()
    assert "fpdiff" not in "\n".join(ln for ln in text.splitlines() if "import" in ln)
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=path.parent, timeout=300)


@pytest.fixture(scope="module")
def add_model(tmp_path_factory):
    import onnx
    from onnx import TensorProto, helper
    d = tmp_path_factory.mktemp("add")
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(2))
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 5]) for n in "xyz"]
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "add", info[:2], info[2:])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(d / "add.onnx"))
    np.savez(d / "inputs.npz", x=x, y=y)
    return str(d / "add.onnx"), str(d / "inputs.npz"), [x.astype(np.float64) + y.astype(np.float64)]


@pytest.fixture(scope="module")
def linear_spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("linear") / "linear.py"
    path.write_text(LINEAR_SPEC)
    return str(path)


def float64_of(job) -> list[np.ndarray]:
    task = repro.task_of(job)
    module = copy.deepcopy(task.source.module).double()
    with torch.no_grad():
        return [module(*(t.double() for t in task.source.inputs)).numpy()]


def test_onnx_graph_on_ort_healthy_wrong_expectation_and_broken(add_model, tmp_path):
    model, inputs, expected = add_model
    job = job_for(model, "ort", "fp16", inputs=inputs)
    observed = run_backend(job)
    c = cell(job, "Add", "onnx")
    versions = report_versions(["onnxruntime"])
    honest = repro.write(tmp_path / "honest", job, c,
        repro.Claim(expected=expected, observed=observed, baseline={"rel_l2": 2e-4},
                         rule="rel-l2", limit=8e-3, versions=versions))
    assert (tmp_path / "honest" / "segment.onnx").exists()
    # the graph ORT ran: the source cast to float16, its inputs rounded to float16
    import onnx
    assert onnx.load(str(tmp_path / "honest" / "segment.onnx")).graph.input[0].type.tensor_type.elem_type == \
        onnx.TensorProto.FLOAT16
    planted = [expected[0] + 1.0]  # an expectation off by one everywhere: the honest backend now "fails"
    wrong = repro.write(tmp_path / "wrong", job, c, repro.Claim(expected=planted, observed=observed, baseline=None,
                        rule="rel-l2", limit=8e-3, versions=versions))
    assert repro.recheck([honest, wrong]) == {str(honest): False, str(wrong): True}
    p = run_script(wrong)
    assert p.returncode == 1 and "relative L2 vs float64" in p.stdout and "element 0: observed" in p.stdout
    report = (tmp_path / "wrong" / "REPORT.md").read_text()
    assert report.startswith("# [ort] Add at fp16: wrong result") and "onnxruntime" in report
    assert "ONNX reference evaluator" in report and "relative L2 vs float64" in report

    shadow = tmp_path / "wrong" / "onnxruntime.py"  # the backend not installed: the script broke, nothing reproduced
    shadow.write_text("raise ModuleNotFoundError(\"No module named 'onnxruntime'\", name='onnxruntime')\n")
    assert repro.recheck([wrong]) == {str(wrong): None}
    shadow.unlink()
    (tmp_path / "wrong" / "segment.onnx").unlink()  # the model file gone: broken, never reproduced
    p = run_script(wrong)
    assert p.returncode == 3 and "REPRO BROKEN" in p.stdout and "segment.onnx" in p.stdout
    assert repro.recheck([wrong]) == {str(wrong): None}


def test_planted_torch_bug_reproduces_with_the_plugin_alone(linear_spec, tmp_path):
    job = job_for(linear_spec, "perturb", "fp32", plugins=(PERTURB,))
    observed, expected = run_backend(job), float64_of(job)
    c = cell(job, "nn.functional.linear", "torch")
    script = repro.write(tmp_path / "b", job, c,
        repro.Claim(expected=expected, observed=observed, baseline={"rel_l2": 1e-7},
                         rule="rel-l2", limit=1e-4, versions=report_versions()))
    assert {"segment.pt2", "perturb.py", "inputs.npz", "expected.npz", "backend_output.npz", "meta.json",
            "REPORT.md"} <= {p.name for p in (tmp_path / "b").iterdir()}
    p = run_script(script)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "relative L2 vs float64 = 1.0" in p.stdout  # perturb's 1e-3, alternating sign
    report = (tmp_path / "b" / "REPORT.md").read_text()
    assert "# [perturb] nn.functional.linear at fp32: wrong result" in report
    assert "relative L2 vs float64: 1.000e-03" in report and "backend.prepare(program" in report


@pytest.mark.parametrize("backend", ["torch", "inductor"])
def test_healthy_torch_backends_do_not_reproduce(linear_spec, tmp_path, backend):
    job = job_for(linear_spec, backend, "fp32")
    observed, expected = run_backend(job), float64_of(job)
    script = repro.write(tmp_path / backend, job, cell(job, "nn.functional.linear", "torch"),
        repro.Claim(expected=expected,
                         observed=observed, baseline=None, rule="rel-l2", limit=1e-5, versions=report_versions()))
    assert repro.recheck([script]) == {str(script): False}
    p = run_script(script)
    assert p.returncode == 0 and "relative L2 vs float64 = " in p.stdout


def test_error_and_crash_cells_retrigger_by_their_rules(linear_spec, tmp_path):
    versions = report_versions()
    job = job_for(linear_spec, "broken-compiler", "fp32", plugins=(MISBEHAVE,))
    c = cell(job, "nn.functional.linear", "torch", "error", "AssertionError: lowering pass lost a buffer")
    raises = repro.write(tmp_path / "raises", job, c,
        repro.Claim(expected=float64_of(job), observed=None, baseline=None,
                         rule="raises", limit=0.0, versions=versions))
    p = run_script(raises)
    assert p.returncode == 1 and "lowering pass lost a buffer" in p.stdout
    assert "fails" in (tmp_path / "raises" / "REPORT.md").read_text().splitlines()[0]

    job = job_for(linear_spec, "dies", "fp32", plugins=(MISBEHAVE,))
    c = cell(job, "nn.functional.linear", "torch", "crash", "the worker died (exit status 3)")
    crash = repro.write(tmp_path / "crash", job, c, repro.Claim(expected=float64_of(job), observed=None, baseline=None,
                        rule="raises", limit=0.0, versions=versions))  # a crash cell gets the crash rule whatever
    p = run_script(crash)
    assert p.returncode == 1 and "exited with status 3" in p.stdout
    # a healthy backend under the same two rules: nothing to re-trigger
    job = job_for(linear_spec, "torch", "fp32")
    calm = [repro.write(tmp_path / rule, job, cell(job, "nn.functional.linear", "torch", status),
        repro.Claim(expected=[],
                        observed=None, baseline=None, rule=rule, limit=0.0, versions=versions))
            for rule, status in (("raises", "error"), ("crash", "crash"))]
    assert repro.recheck([raises, crash, *calm]) == {str(raises): True, str(crash): True, str(calm[0]): False,
                                                      str(calm[1]): False}


def test_iree_compile_failure_is_reproduced_with_the_compiler_alone(add_model, tmp_path):
    model, inputs, expected = add_model
    job = job_for(model, "iree", "fp32", flags=("--iree-no-such-option",), inputs=inputs)
    with pytest.raises(Exception, match="iree-compile"):
        run_backend(job)  # the cell's own failure: iree-compile refuses the flag
    c = cell(job, "Add", "onnx", "error", "iree-compile failed: Unknown command line argument")
    script = repro.write(tmp_path / "b", job, c,
        repro.Claim(expected=expected, observed=None, baseline=None, rule="raises",
                         limit=0.0, versions={}))
    p = run_script(script)
    assert p.returncode == 1 and "iree-no-such-option" in p.stdout, p.stdout + p.stderr
    meta = (tmp_path / "b" / "meta.json").read_text()
    assert "iree-compile segment.mlir" in meta
    healthy = job_for(model, "iree", "fp32", inputs=inputs)
    calm = repro.write(tmp_path / "calm", healthy, cell(healthy, "Add", "onnx", "error"), repro.Claim(expected=expected,
                       observed=None, baseline=None, rule="raises", limit=0.0, versions={}))
    assert repro.recheck([script, calm]) == {str(script): True, str(calm): False}


def test_flips_rule_counts_differing_integer_values(tmp_path):
    spec = tmp_path / "round.py"
    spec.write_text(LINEAR_SPEC.replace("self.lin(x)", "torch.round(x)")
                    .replace("torch.randn(4, 8", "4 * torch.randn(64"))
    job = job_for(str(spec), "torch", "fp32")
    observed, expected = run_backend(job), float64_of(job)
    c = cell(job, "round", "torch")
    same = repro.write(tmp_path / "same", job, c,
        repro.Claim(expected=expected, observed=observed, baseline={"flips": 0},
                       rule="flips", limit=0, versions={}))
    flipped = [expected[0].copy()]
    flipped[0][:3] += 1  # three integer values off by one: three flips
    off = repro.write(tmp_path / "off", job, c, repro.Claim(expected=flipped, observed=observed, baseline={"flips": 0},
                      rule="flips", limit=2, versions={}))
    assert repro.recheck([same, off]) == {str(same): False, str(off): True}
    assert "3 of 64 elements differ" in run_script(off).stdout


def test_signature_is_one_key_per_distinct_bug():
    a = OpsCell("iree", "cpu", "fp16", "static", Status.MISMATCH, op="nn.functional.avg_pool2d", catalog="torch",
                variant="channels-last", case="avg_pool2d#1", family="pool")
    b = copy.copy(a)
    b.case, b.shape_variant = "avg_pool2d#7", "dynamic"  # another sample and shapes: the same bug
    c = copy.copy(a)
    c.variant = "sample"
    assert repro.signature(a) == repro.signature(b) != repro.signature(c)
    assert "/" not in repro.signature(a) and "|" not in repro.signature(a)
