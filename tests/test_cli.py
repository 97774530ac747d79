"""The command line: exit codes, and one clear line for every bad input (no traceback unless --debug)."""
import json
import shlex
import subprocess
import sys

import numpy as np
import pytest
import torch


def run(*args, cwd=None):
    p = subprocess.run([sys.executable, "-m", "fpdiff", *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    return p.returncode, p.stdout, p.stderr


def assert_usage_error(args, needle, cwd=None):
    code, out, err = run(*args, cwd=cwd)
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and "Traceback" not in out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], err


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh()).eval()
    from torch.export import Dim
    torch.onnx.export(m, (torch.randn(2, 8),), str(d / "m.onnx"), dynamo=True, optimize=False,
                      dynamic_shapes=({0: Dim("batch")},))
    return d / "m.onnx"


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_missing_file(tmp_path):
    assert_usage_error(["check", str(tmp_path / "nope.py")], "not found")


def test_directory_as_model(tmp_path):
    assert_usage_error(["check", str(tmp_path)], "directory")


def test_spec_without_model(tmp_path):
    assert_usage_error(["check", write(tmp_path, "s.py", "def inputs(): return ()\n")], "does not define model()")


def test_spec_that_raises(tmp_path):
    assert_usage_error(["check", write(tmp_path, "s.py", "raise ValueError('boom')\n")], "ValueError: boom")


def test_spec_whose_model_raises(tmp_path):
    text = "import torch\ndef model(): raise RuntimeError('no weights')\ndef inputs(): return (torch.ones(1),)\n"
    assert_usage_error(["check", write(tmp_path, "s.py", text)], "model() raised RuntimeError: no weights")


@pytest.mark.slow  # one worker runs the model in float64
def test_a_model_that_cannot_run_in_float64_judges_nothing_in_one_typed_line(tmp_path):
    """Not the user's input (exit 2) and not a failing cell (exit 1): the reference did not run, nothing is judged."""
    text = ("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        if x.dtype == torch.float64:\n            raise RuntimeError('no float64 kernel here')\n"
            "        return x * 2\ndef model(): return M()\ndef inputs(): return (torch.ones(3),)\n")
    code, out, err = run("check", write(tmp_path, "s.py", text), "--backends", "torch", "--precisions", "fp32")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 3 and "Traceback" not in err + out, (code, out, err)
    assert len(lines) == 1 and "the float64 reference (torch on cpu) failed" in lines[0] and "no float64" in err, err
    import fpdiff
    from fpdiff.core.errors import FpdiffError, ReferenceFailed, UsageError
    with pytest.raises(ReferenceFailed, match="no float64 kernel here") as e:
        fpdiff.check(str(tmp_path / "s.py"), backends=["torch"], precisions=["fp32"])
    assert isinstance(e.value, FpdiffError) and not isinstance(e.value, UsageError) and e.value.exit_code == 3


def test_spec_inputs_not_tensors(tmp_path):
    text = "import torch\ndef model(): return torch.nn.Identity()\ndef inputs(): return [1, 2]\n"
    assert_usage_error(["check", write(tmp_path, "s.py", text)], "tuple of tensors")


def test_unparsable_onnx(tmp_path):
    assert_usage_error(["check", write(tmp_path, "m.onnx", "not a protobuf")], "cannot read ONNX file")


def test_unknown_model_kind(tmp_path):
    assert_usage_error(["check", write(tmp_path, "m.txt", "x")], "unknown model kind")


def test_unknown_example():
    assert_usage_error(["check", "example:nope"], "unknown example 'nope'")


def test_unknown_backend_and_precision():
    assert_usage_error(["check", "example:tinycnn", "--backends", "torch,tensorrt"], "unknown backend 'tensorrt'")
    assert_usage_error(["check", "example:tinycnn", "--precisions", "fp12"], "unknown precision 'fp12'")
    assert_usage_error(["check", "example:tinycnn", "--precisions", "fp8"], "fp8 is a quantized format")


def test_unknown_shape_variant():
    assert_usage_error(["check", "example:tinyformer", "--shape-variants", "wobbly"], "unknown shape variant")


def test_bad_shape_syntax_and_missing_plugin(tmp_path):
    assert_usage_error(["check", "example:tinycnn", "--shape", "x=a,b"], "--shape wants NAME=D0,D1")
    assert_usage_error(["check", "example:tinycnn", "--plugin", str(tmp_path / "p.py")], "plugin file not found")


def test_onnx_symbolic_dims_need_shape(onnx_model):
    assert_usage_error(["check", str(onnx_model)], "give its shape with --shape")


@pytest.mark.slow
def test_npz_missing_wrong_shape_wrong_dtype(onnx_model, tmp_path):
    name = "x"
    import onnx
    name = [i.name for i in onnx.load(str(onnx_model)).graph.input][0]
    cases = {"missing": ({"other": np.zeros((2, 8), np.float32)}, "lacks arrays"),
             "shape": ({name: np.zeros((2, 7), np.float32)}, "does not fit"),
             "dtype": ({name: np.zeros((2, 8), np.float64)}, "dtype float64")}
    for key, (arrays, needle) in cases.items():
        path = tmp_path / f"{key}.npz"
        np.savez(path, **arrays)
        assert_usage_error(["check", str(onnx_model), "--inputs", str(path)], needle)
    assert_usage_error(["check", str(onnx_model), "--inputs", str(tmp_path / "none.npz")], "inputs file not found")


@pytest.mark.slow
def test_nonfinite_inputs_refused_unless_allowed(tmp_path):
    text = ("import torch\ndef model(): return torch.nn.Linear(4, 4)\n"
            "def inputs(): return (torch.tensor([[1.0, float('nan'), 2.0, 3.0]]),)\n")
    spec = write(tmp_path, "s.py", text)
    assert_usage_error(["check", spec, "--backends", "torch"], "non-finite")
    code, out, err = run("check", spec, "--backends", "torch", "--precisions", "fp32", "--allow-nonfinite")
    assert code == 0, (out, err)


def test_debug_shows_the_traceback(tmp_path):
    code, out, err = run("--debug", "check", str(tmp_path / "nope.py"))
    assert code != 0 and "Traceback" in err


@pytest.mark.slow
def test_onnx_model_checks_with_json_report(onnx_model, tmp_path):
    import json
    out_json = tmp_path / "r.json"
    code, out, err = run("check", str(onnx_model), "--shape", "input=3,8", "--backends", "ort,iree",
                         "--precisions", "fp32,fp16", "--json", str(out_json))
    assert code == 0, (out, err)
    report = json.loads(out_json.read_text())
    assert report["reference"]["backend"] == "onnxref" and report["reference"]["dtype"] == "float64"
    keys = {"backend", "device", "precision", "shape_variant", "status", "metrics", "baseline_metrics",
            "computed_dtype", "findings", "duration_s"}
    for c in report["cells"]:
        assert keys <= set(c)
        assert c["status"] == "pass", c
        for f in c["findings"]:
            assert set(f) == {"kind", "message", "op", "remedy"}
    assert "pass" in out


def next_commands(out: str) -> list[str]:
    return [ln.removeprefix("next: ") for ln in out.splitlines() if ln.startswith("next: ")]


@pytest.mark.slow
def test_mismatch_exits_1_and_names_the_locate_command_that_explains_it(tmp_path):
    from conftest import PLUGINS
    code, out, err = run("check", "example:tinycnn", "--plugin", str(PLUGINS / "perturb.py"), "--backends",
                         "perturb", "--precisions", "fp32", "--no-store", cwd=tmp_path)
    assert code == 1 and "mismatch" in out, (out, err)
    plugin = shlex.quote(str(PLUGINS / "perturb.py"))
    assert next_commands(out) == [f"fpdiff locate example:tinycnn --backend perturb --precision fp32 --plugin {plugin}"]
    code, out, err = run(*shlex.split(next_commands(out)[0])[1:], "--no-repro", "--no-store", cwd=tmp_path)
    assert code == 1 and "perturb departs at aten.conv2d.default" in out, (out, err)


@pytest.mark.slow
def test_precision_loss_names_the_plan_command_that_explains_it(tmp_path):
    code, out, err = run("check", "example:rmsnorm", "--backends", "torch", "--precisions", "fp32,fp16", "--no-store",
                         "--json", str(tmp_path / "r.json"), cwd=tmp_path)
    command = "fpdiff plan example:rmsnorm --precision fp16 --backend torch"
    assert code == 0 and next_commands(out) == [command], (out, err)
    assert json.loads((tmp_path / "r.json").read_text())["next"] == [command]
    code, out, err = run(*shlex.split(command)[1:], "--no-speed", "--no-store", cwd=tmp_path)
    assert code == 0 and "verified plan: keep 2 ops in fp32" in out, (out, err)


def test_version():
    import fpdiff
    code, out, _ = run("--version")
    assert code == 0 and out.strip() == f"fpdiff {fpdiff.__version__}" and fpdiff.__version__[0].isdigit()


def test_backend_flags_bad_input_is_one_line():
    assert_usage_error(["check", "example:tinycnn", "--backend-flag", "torch=--fast"], "backend torch takes no flags")
    assert_usage_error(["check", "example:tinycnn", "--backend-flag", "=x"], "--backend-flag wants NAME=FLAG")
    assert_usage_error(["check", "example:tinycnn", "--backend-flag", "tensorrt=x"], "unknown backend 'tensorrt'")
    assert_usage_error(["locate", "example:tinycnn", "--backend-flag", "onnxref=x"], "backend onnxref takes no flags")
    assert_usage_error(["plan", "example:tinycnn", "--backend-flag", "onnxref=x"], "onnxref takes no")
    assert_usage_error(["ranges", "example:tinycnn", "--backend-flag", "iree=x"], "unrecognized arguments")


def test_examples_and_backends_list():
    code, out, _ = run("examples")
    assert code == 0 and "example:tinycnn" in out and "example:router" in out
    code, out, _ = run("backends")
    status = {ln.split()[0]: ln.split(None, 1)[1] for ln in out.splitlines() if ln.strip()}
    # every built-in is installed with fpdiff: each must say available, not merely be listed
    builtins = ("torch", "inductor", "ort", "iree", "onnxref", "openvino")  # ipex lives in its own interpreter
    assert code == 0 and all(status.get(b) == "available" for b in builtins), out
    if sys.platform != "darwin":  # Core ML converts here and predicts only on macOS: said, not "available" alone
        assert status["coreml"].startswith("available; converts only: Core ML predicts on macOS"), out


@pytest.mark.slow
def test_locate_names_the_culprit_and_writes_json(tmp_path):
    import json
    code, out, err = run("locate", "example:rmsnorm", "--precision", "fp16", "--json", str(tmp_path / "l.json"),
                         "--repro", str(tmp_path / "bundle"))
    assert code == 0, err
    assert "repro bundle: python" in out and (tmp_path / "bundle" / "repro.py").exists()
    assert "overflow" in out and "rmsnorm.py:15" in out
    data = json.loads((tmp_path / "l.json").read_text())
    assert data["culprit"]["op"] == "aten.mul.Tensor" and len(data["ops"]) == 9


@pytest.mark.slow
def test_locate_with_nothing_wrong_says_so(tmp_path):
    code, out, _ = run("locate", "example:tinycnn", "--precision", "fp32", cwd=tmp_path)
    assert code == 0 and "no op departs" in out


def test_locate_bad_input():
    assert_usage_error(["locate", "example:tinycnn", "--backend", "nope"], "unknown backend")
    assert_usage_error(["locate", "example:tinycnn", "--precision", "fp7"], "unknown precision")


@pytest.mark.slow
def test_locate_on_a_plugin_backend_names_the_segment_and_exits_1(tmp_path):
    from conftest import PLUGINS
    code, out, err = run("locate", "example:tinycnn", "--backend", "perturb", "--plugin", str(PLUGINS / "perturb.py"),
                         "--precision", "fp32", "--no-repro", cwd=tmp_path)
    assert code == 1, err
    assert "perturb departs at aten.conv2d.default" in out and "segment ops 0..0" in out and "features.0" in out


def test_locate_bad_shape_variant():
    assert_usage_error(["locate", "example:tinyformer", "--backend", "ort", "--shape-variant", "wobbly"],
                       "unknown shape variant")
    assert_usage_error(["locate", "example:tinycnn", "--backend", "ort", "--shape-variant", "dynamic"],
                       "declares dynamic_shapes")


@pytest.mark.slow
def test_ops_unknown_pattern_lists_the_closest_names():
    assert_usage_error(["ops", "--ops", "avgpool2", "--catalog", "torch"], "nn.functional.avg_pool2d")
    assert_usage_error(["ops", "--ops", "AvgPool", "--catalog", "onnx"], "AveragePool")


def test_ops_bad_input():
    assert_usage_error(["ops", "--catalog", "tflite"], "unknown catalog")
    assert_usage_error(["ops", "--ops", "relu", "--variants", "wobbly"], "unknown variant")
    assert_usage_error(["ops", "--ops", "relu", "--time", "0"], "--time must be positive")
    assert_usage_error(["ops", "--ops", "relu", "--time", "soon"], "duration")
    assert_usage_error(["ops", "--ops", "relu", "--backends", "nope"], "unknown backend")
    assert_usage_error(["ops", "--ops", "relu", "--ray", "127.0.0.1:1"], "Ray")


def test_fuzz_bad_input():
    assert_usage_error(["fuzz", "--time", "0"], "--time must be positive")
    assert_usage_error(["fuzz", "--graphs", "0"], "--graphs must be at least 1")
    assert_usage_error(["fuzz", "--backends", "nope"], "unknown backend")
    assert_usage_error(["fuzz", "--ops", "sofmax_typo_zz"], "closest")
    assert_usage_error(["fuzz", "--forms", "tflite"], "unknown graph form")
    assert_usage_error(["fuzz", "--backends", "inductor", "--forms", "onnx"], "takes onnx")
    assert_usage_error(["fuzz", "--max-ops", "0"], "--max-ops")
    assert_usage_error(["fuzz", "--graphs", "2", "--ray", "127.0.0.1:1"], "Ray")


def test_diff_of_two_support_tables(tmp_path):
    def table(name, support, version):
        rows = [{"catalog": "onnx", "op": "AveragePool", "backend": "ort", "precision": "fp16", "support": support,
                 "detail": ""}]
        return write(tmp_path, name, json.dumps({"kind": "ops-support", "versions": {"onnxruntime": version},
                                                 "rows": rows}))
    old, new = table("a.json", "other-dtype", "1.31.0"), table("b.json", "native", "1.32.0")
    code, out, err = run("diff", old, new)
    assert code == 0 and "other-dtype -> native" in out and "onnxruntime: 1.31.0 -> 1.32.0" in out, (out, err)
    code, out, _ = run("diff", new, old)
    assert code == 1 and "native -> other-dtype" in out
    assert_usage_error(["diff", old, "3"], "not one of each")
    assert_usage_error(["diff", old, str(tmp_path / "missing.json")], "cannot read")


def test_quiet_is_taken_before_and_after_the_subcommand():
    from fpdiff.cli import parser
    assert parser().parse_args(["--quiet", "check", "m.py"]).quiet
    assert parser().parse_args(["check", "m.py", "-q"]).quiet
    assert not parser().parse_args(["check", "m.py"]).quiet
    assert parser().parse_args(["ops", "--quiet"]).quiet and parser().parse_args(["ranges", "m.py", "-q"]).quiet


def run_at_a_terminal(*args, cwd=None):
    """fpdiff with stderr on a terminal (a pty) and stdout piped: (exit code, stdout, what the terminal got)."""
    import os
    import pty
    import threading
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")} | {"TERM": "xterm-256color"}
    p = subprocess.Popen([sys.executable, "-m", "fpdiff", *args], stdout=subprocess.PIPE, stderr=slave,
                         stdin=subprocess.DEVNULL, cwd=cwd, env=env)
    os.close(slave)
    chunks = []

    def drain():  # read as it comes: a full pty would stall the run
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other end closed
                return
            if not chunk:
                return
            chunks.append(chunk)
    reader = threading.Thread(target=drain)
    reader.start()
    out, _ = p.communicate(timeout=600)
    reader.join()
    os.close(master)
    return p.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


SEGMENTING_PLUGIN = '''
import time

from fpdiff.runtime.progress import segment


class Segmenting:
    name = "segmenting"

    def available(self):
        return None

    def prepare(self, program, precision, device):
        module = program.module()

        def run(*inputs):
            for i in range(4):  # a long cell of four blocks, told as they are done
                time.sleep(0.3)
                segment(i + 1, 4, f"block.{i}")
            return module(*inputs)
        return run
'''


@pytest.mark.slow
def test_progress_goes_to_a_terminal_stderr_with_a_cells_segments_and_quiet_turns_it_off(tmp_path):
    plugin = write(tmp_path, "segmenting.py", SEGMENTING_PLUGIN)
    args = ["check", "example:tinycnn", "--plugin", plugin, "--backends", "segmenting", "--precisions", "fp32",
            "--repeat", "1", "--no-store"]
    code, out, err = run_at_a_terminal(*args)
    assert code == 0, (out, err)
    import re
    cells, segments = re.compile(r"\d/\d cells"), re.compile(r"segment \d/4 \(block\.\d\)")
    assert cells.search(err) and segments.search(err), err  # the worker's blocks, seen by the parent
    assert not cells.search(out) and not segments.search(out) and "pass" in out  # stdout: the table only
    code, out, err = run_at_a_terminal(*args, "--quiet")
    assert code == 0 and not cells.search(err) and not segments.search(err), err


@pytest.mark.slow
def test_json_to_stdout_is_all_stdout_holds_and_shows_no_progress(tmp_path):
    code, out, err = run_at_a_terminal("check", "example:tinycnn", "--backends", "torch", "--precisions", "fp32",
                                       "--no-store", "--json", "-")
    assert code == 0, (out, err)
    assert json.loads(out)["kind"] == "check"  # nothing but the JSON on stdout
    assert "JSON report: stdout" in err and "pass" in err  # the table moved to stderr
    assert "0/1 cells" not in err and "1/1 cells" not in err  # no progress beside a JSON stream
    code, out, err = run("ranges", "example:tinycnn", "--json", "-")
    assert code == 0 and json.loads(out)["kind"] == "ranges", err


@pytest.mark.slow
def test_locate_shows_its_steps_at_a_terminal_and_not_on_stdout():
    code, out, err = run_at_a_terminal("locate", "example:tinycnn", "--no-repro", "--no-store")
    assert code in (0, 1), (out, err)
    assert "locate torch fp16: ops" in err and "locate torch" not in out


def test_cache_info_and_clear(tmp_path):
    for name in (f"{'a' * 20}.onnx", f"{'b' * 20}.vmfb", f"{'b' * 20}.import.json"):
        (tmp_path / name).write_bytes(b"x" * 1024)
    (tmp_path / "notes.txt").write_text("not the cache's")
    report = tmp_path / "info.json"
    code, out, err = run("cache", "--cache-dir", str(tmp_path), "--json", str(report))
    assert code == 0, err
    assert f"cache: {tmp_path}" in out and "size: 3.0 KiB in 2 entries" in out and "limit: " in out
    info = json.loads(report.read_text())
    assert (info["kind"], info["entries"], info["bytes"]) == ("cache", 2, 3072)
    code, out, err = run("cache", "clear", "--cache-dir", str(tmp_path))
    assert code == 0 and f"cleared {tmp_path}: freed 3.0 KiB (2 entries)" in out, err
    assert {p.name for p in tmp_path.iterdir() if not p.name.startswith(".")} == {"notes.txt", "info.json"}


@pytest.mark.parametrize("args", [["cache"], ["check", "example:tinycnn"]])
def test_malformed_cache_limit(args, monkeypatch):
    monkeypatch.setenv("FPDIFF_CACHE_MAX", "4 gigs")
    assert_usage_error(args, "FPDIFF_CACHE_MAX wants a size in bytes or with a suffix")


def test_rejudge_bad_input_is_one_line(tmp_path):
    assert_usage_error(["rejudge", str(tmp_path / "nope.json")], "cannot read")
    plan = write(tmp_path, "p.json", '{"kind": "plan", "model": "m"}')
    assert_usage_error(["rejudge", plan], "JSON report of check, fuzz, ops; this one is the report of fpdiff plan")
    old = write(tmp_path, "c.json", '{"kind": "check", "model": "m", "cells": []}')
    assert_usage_error(["rejudge", old], "holds no evidence")


@pytest.mark.slow  # one check on torch
def test_a_stored_check_is_judged_again_the_same_without_running_a_backend(tmp_path):
    import json
    first, again = tmp_path / "first.json", tmp_path / "again.json"
    code, out, err = run("check", "example:tinycnn", "--backends", "torch", "--precisions", "fp32,fp16",
                         "--json", str(first), "--no-store")
    assert code == 0, err
    code, out, err = run("rejudge", str(first), "--json", str(again))
    assert code == 0 and "judged again from the stored evidence: no verdicts changed" in out, (out, err)
    a, b = json.loads(first.read_text()), json.loads(again.read_text())
    assert [(c["status"], c["reason"], c["findings"]) for c in a["cells"]] == \
        [(c["status"], c["reason"], c["findings"]) for c in b["cells"]]
    assert b["rejudged"] == {"changed": [], "skipped": []}


def test_inputs_that_do_not_fit_the_model_are_a_usage_error(tmp_path):
    """The user's own input error: exit 2 and one line naming the layer, not 'the float64 reference failed' (exit 3)."""
    spec = tmp_path / "badin.py"
    spec.write_text("import torch\n\ndef model():\n    return torch.nn.Sequential(torch.nn.Linear(16, 8))\n\n"
                    "def inputs():\n    return (torch.randn(2, 12),)\n")
    assert_usage_error(["check", str(spec), "--backends", "torch", "--precisions", "fp32"],
                       "the inputs do not fit the model: 0 (Linear: takes last dim 16)")
