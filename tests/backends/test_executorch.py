"""ExecuTorch: the program lowered with XNNPACK's partitioner (or none) and run by ExecuTorch's runtime; each cell says
what XNNPACK took and what ran on the CPU kernels, in which dtype."""
import copy
import subprocess
import sys

import pytest
import torch

import fpdiff
from fpdiff.core.status import Status

pytest.importorskip("executorch", reason="executorch is not installed (pip install 'fpdiff[executorch]')")
pytestmark = pytest.mark.slow  # real lowering and runs: make test, not make test-fast
XNN, CPU = "XNNPACK", "ExecuTorch CPU kernels"


@pytest.fixture(scope="module")
def cells():
    r = fpdiff.check("example:tinycnn", backends=["executorch"], precisions=["fp32", "fp16", "bf16", "amp-fp16"],
                     repeat=1, cache_dir=False)
    return {c.precision: c for c in r.cells}


def test_fp32_passes_with_most_ops_on_xnnpack(cells):
    c = cells["fp32"]
    assert c.status == Status.PASS and c.computed_dtype == "float32", c.reason
    runners = c.info["ops_by_runner"]
    assert set(runners[XNN]) == {"float32"} and runners[XNN]["float32"] > runners[CPU]["float32"]
    assert c.op_dtypes == {"float32": sum(n for r in runners.values() for n in r.values())}
    assert "native_group_norm" in c.info["on_cpu_kernels"]  # XNNPACK has no group norm: left to the CPU kernels


def test_fp16_runs_in_fp16_on_xnnpack(cells):
    c = cells["fp16"]
    assert c.status == Status.PASS, c.reason
    assert c.info["ops_by_runner"][XNN].get("float16", 0) >= 4
    assert not [f for f in c.findings if f.kind == "dtype-changed"]


def test_bf16_runs_on_the_cpu_kernels_and_says_they_accumulate_low(cells):
    c = cells["bf16"]
    assert c.status == Status.PASS, c.reason
    assert "bfloat16" not in c.info["ops_by_runner"].get(XNN, {})  # XNNPACK takes no bf16
    assert c.info["ops_by_runner"][CPU]["bfloat16"] >= 6
    low = [f for f in c.findings if f.kind == "low-accumulation"]
    assert low and "convolution" in low[0].message


def test_autocast_is_a_declared_refusal(cells):
    c = cells["amp-fp16"]
    assert c.status == Status.UNSUPPORTED and "fp32, fp16 or bf16" in c.reason


def test_without_a_partitioner_every_op_runs_on_the_cpu_kernels():
    r = fpdiff.check("example:tinycnn", backends=["executorch"], precisions=["fp16"], repeat=1, cache_dir=False,
                     backend_flags={"executorch": ["partitioner=none"]})
    c = r.cells[0]
    assert c.status == Status.PASS, c.reason
    assert list(c.info["ops_by_runner"]) == [CPU] and c.info["partitioner"] == "none"
    assert "convolution" in next(f.message for f in c.findings if f.kind == "low-accumulation")


@pytest.fixture(scope="module")
def pte(tmp_path_factory):
    """tinycnn converted as a user would, at fp32 and at fp16 (the model cast with .half())."""
    from fpdiff.backends.executorch import write_pte
    from fpdiff.sources import load
    d = tmp_path_factory.mktemp("pte")
    s = load("example:tinycnn")
    m = s.module.eval()
    write_pte(torch.export.export(m, tuple(s.inputs)), "xnnpack", d / "fp32.pte")
    half = copy.deepcopy(m).half()
    write_pte(torch.export.export(half, tuple(t.half() for t in s.inputs)), "xnnpack", d / "fp16.pte")
    return d


def test_the_users_pte_is_judged_at_the_precision_it_computes_in_or_the_one_named(pte):
    """Read from the file: float16 inputs and outputs, an fp16 cell. Named fp32, the same file is judged at fp32:
    its departure is a mismatch, and the cell says it returned fp16."""
    r = fpdiff.check("example:tinycnn", backends=["torch"], precisions=["fp32"], repeat=1,
                     artifacts=[f"executorch={pte / 'fp16.pte'}", f"executorch:fp32={pte / 'fp16.pte'}"])
    c = {(x.backend, x.precision): x for x in r.cells}
    cell = c[("executorch", "fp16")]
    assert cell.status == Status.PASS and cell.info["artifact"].endswith("fp16.pte"), cell.reason
    assert "float16" in cell.info["artifact_precision"]
    named = c[("executorch", "fp32")]
    assert named.status == Status.MISMATCH and any(f.kind == "dtype-changed" for f in named.findings)
    assert ("torch", "fp32") in c and len(c) == 3  # each file replaces fpdiff's own conversion: one cell each
    from rich.console import Console

    from fpdiff import analyses
    from fpdiff.analyses.check.text import render
    con = Console(record=True, width=300)
    render(r, con)
    assert "your file in executorch/cpu/fp16/static: " in con.export_text()
    assert "your file " in analyses.html_page(r.as_dict())


def run(*args):
    p = subprocess.run([sys.executable, "-m", "fpdiff", *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("artifact, needle", [
    ("executorch={d}/missing.pte", "missing.pte: no such file"),
    ("executorch={d}/fp32.onnx", "executorch runs .pte files"),
    ("executorch={d}", "executorch runs .pte files"),
    ("executorch:fp99={d}/fp32.pte", "fp99"),
    ("executorch", "--artifact wants BACKEND=PATH"),
    ("torch={d}/fp32.pte", "torch runs no converted file of the user's; backends that do:"),
])
def test_bad_artifacts_are_one_typed_error_before_any_job(pte, artifact, needle):
    from fpdiff.core.errors import UsageError
    with pytest.raises(UsageError) as e:
        fpdiff.check("example:tinycnn", backends=["torch"], precisions=["fp32"], artifacts=[artifact.format(d=pte)])
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_file_for_other_inputs_is_one_line_and_exit_2(pte):
    code, out, err = run("check", "example:tinyformer", "--backends", "torch", "--precisions", "fp32",
                         "--artifact", f"executorch={pte / 'fp32.pte'}")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "the artifact fp32.pte" in lines[0], err


@pytest.fixture(scope="module")
def cpu_kernels_pte(tmp_path_factory):
    """et_long_reduction converted by a user with no partitioner at fp16: the file departs."""
    from conftest import SPECS
    from fpdiff.backends.executorch import write_pte
    from fpdiff.sources import load
    s = load(str(SPECS / "et_long_reduction.py"))
    half = copy.deepcopy(s.module).eval().half()
    out = tmp_path_factory.mktemp("user") / "model.pte"
    write_pte(torch.export.export(half, tuple(t.half() for t in s.inputs)), "none", out)
    return out


def test_locate_on_the_users_file_bisects_fpdiffs_conversion_and_the_bundle_needs_executorch_alone(
        cpu_kernels_pte, tmp_path):
    """A long positive fp16 sum on the CPU kernels (no partitioner), in the user's file and in fpdiff's conversion
    with the same flag: the segment programs, each lowered the same way, narrow the departure to the convolution,
    which stands for the file; the bundle's .pte reproduces it without fpdiff."""
    from conftest import SPECS
    r = fpdiff.locate(str(SPECS / "et_long_reduction.py"), backend="executorch", precision="fp16",
                      backend_flags={"executorch": ["partitioner=none"]}, artifact=str(cpu_kernels_pte),
                      repro=str(tmp_path / "b"))
    assert r.artifact["status"] == "mismatch" and r.artifact["rel_l2"] > 0.1
    assert "so the segment found stands for the file" in r.findings[0].message, r.findings[0].message
    assert r.segment is not None and r.segment.ops[-1] == "aten.conv1d.default", r.segment
    assert (tmp_path / "b" / "segment.pte").exists()
    text = (tmp_path / "b" / "repro.py").read_text()
    assert "fpdiff" not in "\n".join(ln for ln in text.splitlines() if "import" in ln)
    p = subprocess.run([sys.executable, r.repro], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 1 and "the same outputs as the cell's, bit for bit" in p.stdout, p.stdout + p.stderr


def test_a_file_that_departs_where_fpdiffs_conversion_does_not_is_said_to_differ_in_how_it_was_made():
    """The reading of locate --artifact (the real run is the test above): a segment stands for the file only when
    fpdiff's conversion departs within 4x of the file's error."""
    from types import SimpleNamespace

    from fpdiff.analysis.locate.artifact import FileVerdict, reading
    from fpdiff.judging.cell import Cell
    said = FileVerdict("model.pte", Cell("executorch", "cpu", "fp16", "static", Status.MISMATCH,
                                         "rel L2 7.1e-01 is 1955x the baseline's; more", metrics={"rel_l2": 0.71}))
    held = reading(said, SimpleNamespace(output_error=3.6e-4, segment=None))
    assert "does not depart as the file does" in held.message and held.remedy
    stands = reading(said, SimpleNamespace(output_error=0.5, segment=object()))
    assert "the segment found stands for the file" in stands.message
    far = reading(said, SimpleNamespace(output_error=0.05, segment=object()))  # 14x apart: another departure
    assert "does not depart as the file does" in far.message


def test_an_op_outside_core_aten_is_a_refusal_naming_it():
    from conftest import SPECS
    r = fpdiff.check(str(SPECS / "histc_router.py"), backends=["executorch"], precisions=["fp32"], repeat=1)
    c = r.cells[0]
    assert c.status == Status.UNSUPPORTED and "aten.histc" in c.reason, c.reason


# Quantized cells: ExecuTorch's XNNPACKQuantizer through PT2E, the .pte run by ExecuTorch's runtime, judged against
# float64 and the exact emulation of the quantized program it ran
QUANT_ZERO_POINT = str(__import__("conftest").PLUGINS / "quant_executorch_zero_point.py")


@pytest.fixture(scope="module")
def quantized():
    r = fpdiff.quant("example:tinyformer", schemes=["int8", "int8-dynamic", "int4-weight", "fp8"],
                     backends=["executorch", "executorch-zero-point"], plugins=[QUANT_ZERO_POINT])
    return r, {(c.backend, c.precision): c for c in r.cells}


def test_static_int8_matches_the_emulation_and_says_what_xnnpack_ran_in_integers(quantized):
    _, cells = quantized
    c = cells["executorch", "int8"]
    assert c.status == Status.PASS, c.reason
    assert 1e-3 < c.metrics["quantization_loss"] < 5e-2
    assert c.metrics["departure"] < 1.5 * c.metrics["quantization_loss"]
    assert c.info["integer_ops"] == {"linear (XNNPACK)": 4}  # the four projections ran in XNNPACK's int8 kernels
    assert [f.split()[0] for f in c.info["left_float"]] == ["bmm", "bmm"]  # attention's products stayed float
    assert "XNNPACKQuantizer" in c.info["quantized_by"] and "int8 per-tensor (calibrated)" in c.info["scheme"]


def test_dynamic_int8_is_emulated_per_row_as_xnnpack_runs_it(quantized):
    _, cells = quantized
    c = cells["executorch", "int8-dynamic"]
    assert c.status == Status.PASS, c.reason
    # XNNPACK ranges each row of a linear's input, where the program declares one range per tensor: emulated as it
    # runs, the backend matches to float32 rounding (per tensor, it departed by about the format's own cost)
    assert c.metrics["departure"] < 1e-6 and c.metrics["quantization_loss"] > 1e-3
    assert "one range per row" in c.info["scheme"]


def test_formats_the_xnnpack_quantizer_lacks_are_declared_refusals(quantized):
    _, cells = quantized
    for scheme in ("int4-weight", "fp8"):
        c = cells["executorch", scheme]
        assert c.status == Status.UNSUPPORTED and "XNNPACK quantizer has no" in c.reason, c.reason


def test_a_planted_zero_point_bug_is_mismatch_from_the_outputs_alone(quantized):
    r, cells = quantized
    bad = cells["executorch-zero-point", "int8"]
    assert bad.status == Status.MISMATCH and "departs from the exact emulation" in bad.reason, bad.reason
    assert bad.metrics["departure"] > 1.5 * bad.metrics["quantization_loss"]
    assert cells["executorch-zero-point", "int8-dynamic"].status == Status.PASS  # no zero point planted there
    assert r.exit_code() == 1


def test_a_correctly_quantized_model_whose_loss_is_large_is_quantization_loss():
    r = fpdiff.quant(str(__import__("conftest").SPECS / "quant_channel_ranges.py"), schemes=["int8"],
                     backends=["executorch"])
    (c,) = r.cells
    assert c.status == Status.QUANTIZATION_LOSS, c.reason
    assert c.metrics["quantization_loss"] > 5e-2 and c.metrics["departure"] < 1.5 * c.metrics["quantization_loss"]


def test_xnnpacks_silent_dynamic_conv_bug_is_mismatch_where_static_int8_and_ort_pass():
    # findings/quant-002: SiLU into a dynamically quantized conv, channels == height == width: the lowered program
    # runs and returns permuted numbers
    r = fpdiff.quant(str(__import__("conftest").SPECS / "quant_silu_square.py"), schemes=["int8", "int8-dynamic"],
                     backends=["executorch", "ort"])
    cells = {(c.backend, c.precision): c for c in r.cells}
    bad = cells["executorch", "int8-dynamic"]
    assert bad.status == Status.MISMATCH and bad.metrics["departure"] > 10 * bad.metrics["quantization_loss"]
    assert cells["executorch", "int8"].status == Status.PASS
    assert cells["ort", "int8-dynamic"].status == Status.PASS and cells["ort", "int8"].status == Status.PASS
