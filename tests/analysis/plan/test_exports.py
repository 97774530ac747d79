"""plan --export TARGET=PATH: the verified plan written for each target, read back, and run again where its numbers
are computed (ONNX Runtime, the ONNX reference evaluator in real fp16, ExecuTorch), or refused with its reason.
example:rmsnorm overflows in pure fp16 (error inf), so a file that loses the plan's fp32 ops fails its check."""
import json
import math
import subprocess
import sys

import onnx
import pytest
import torch
from onnx import TensorProto

import fpdiff
from fpdiff.analysis.plan import exports
from fpdiff.analysis.plan.jobs import Jobs
from fpdiff.analysis.plan.search import Export, ExportRun, Plan
from fpdiff.analysis.plan.targets import coreml as coreml_target
from fpdiff.analysis.plan.targets import onnx as targets_onnx
from fpdiff.analysis.plan.torch_models import TorchTrials, _float64_outputs
from fpdiff.backends import registry
from fpdiff.cli import main
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.model.mixed import program_module
from fpdiff.sources import load

slow = pytest.mark.slow  # real converters and backends: make test, not make test-fast
KEPT = {"mul", "mean"}  # rmsnorm's plan: the square that overflows fp16 and the mean of it


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """rmsnorm's plan exported to every target at once."""
    d = tmp_path_factory.mktemp("exports")
    paths = {"onnx": d / "plan.onnx", "onnx-typed": d / "typed.onnx", "coreml": d / "plan.mlpackage",
             "executorch": d / "plan.pte", "litert": d / "plan.tflite"}
    p = fpdiff.plan("example:rmsnorm", precision="fp16", measure_speed=False,
                    exports={t: str(x) for t, x in paths.items()})
    assert p.passed and p.kept == KEPT
    return p, {e.target: e for e in p.exports}, paths


@pytest.fixture(scope="module")
def rmsnorm_trials():
    """rmsnorm's trials as plan builds them (its fp16 program, inputs, float64 outputs), to export other keep-sets."""
    s = load("example:rmsnorm")
    p = prec.get("fp16")
    jobs = Jobs("cpu", (), {}, 300.0, None)
    trials = TorchTrials(jobs, "torch", program_module(s.module, s.inputs, p), s, _float64_outputs(s.module, s.inputs),
                         p, 1e-2)
    yield trials, p
    jobs.close()


@slow
def test_exports_come_in_the_order_asked_and_only_litert_writes_nothing(planned):
    p, by, paths = planned
    assert [e.target for e in p.exports] == ["onnx", "onnx-typed", "coreml", "executorch", "litert"]
    assert all(e.written == paths[e.target].exists() for e in p.exports)
    assert [e.target for e in p.exports if not e.written] == ["litert"]
    assert p.exit_code() == 1  # Core ML's numbers need macOS, LiteRT writes nothing: not everything verified


@slow
def test_onnx_takes_fp32_and_verifies_on_the_onnx_cross_check(planned):
    p, by, paths = planned
    e = by["onnx"]
    assert e.verified and e.backend == "ort" and e.runs[0].precision == "fp32" and e.error <= p.tolerance
    m = onnx.load(str(paths["onnx"]))
    assert m.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert e.op_dtypes == {"float32": 2, "float16": 8}  # the square and its mean; the rest fp16
    assert p.export is e  # the single export of earlier versions is the onnx target


@slow
def test_onnx_typed_is_fp16_throughout_every_value_typed_and_verified_in_real_fp16(planned):
    p, by, paths = planned
    e = by["onnx-typed"]
    m = onnx.load(str(paths["onnx-typed"]))
    assert [v.type.tensor_type.elem_type for v in [*m.graph.input, *m.graph.output]] == [TensorProto.FLOAT16] * 2
    assert targets_onnx.untyped_values(m) == [] and len(m.graph.value_info) > 10
    casts = [n for n in m.graph.node if n.op_type == "Cast"]
    assert {targets_onnx._cast_to(n) for n in casts} == {TensorProto.FLOAT, TensorProto.FLOAT16}  # around the kept ops
    assert e.op_dtypes == by["onnx"].op_dtypes
    # ONNX Runtime's CPU provider runs fp16 nodes in fp32: the reference evaluator, in the graph's dtypes, judges
    assert e.verified and e.backend == "onnxref" and e.runs[0].precision == "fp16"
    assert 0 < e.error <= p.tolerance and e.error != by["onnx"].error


@slow
def test_coreml_keeps_the_plans_ops_fp32_read_back_and_says_it_needs_macos(planned):
    p, by, paths = planned
    e = by["coreml"]
    assert e.written and (paths["coreml"] / "Manifest.json").exists()
    assert e.op_dtypes["float32"] == 2 and e.op_dtypes["float16"] >= 5
    assert e.check.startswith("the kept ops compute in fp32 and the rest in fp16")
    if sys.platform != "darwin":
        assert not e.verified and e.runs == [] and "Core ML predicts only on macOS" in e.reason


@slow
def test_coreml_read_back_fails_when_the_op_selector_keeps_nothing(rmsnorm_trials):
    trials, _ = rmsnorm_trials
    model, owners = coreml_target.coreml_model(trials.gm, trials.inputs, fp32_ops=())
    counts, wrong = coreml_target.coreml_check(model, owners, KEPT)
    assert "float32" not in counts and len(wrong) == 2
    assert any("(mul) computes in fp16, the plan keeps it in fp32" in w for w in wrong)
    assert any("(mean) computes in fp16" in w for w in wrong)
    model, owners = coreml_target.coreml_model(trials.gm, trials.inputs, fp32_ops=KEPT)
    assert coreml_target.coreml_check(model, owners, KEPT) == ({"float16": 6, "float32": 2}, [])


@slow
def test_coreml_owners_follow_decomposed_and_fused_ops():
    """tinycnn: GroupNorm becomes seven Core ML ops named after none of its torch node (matched by the stack trace),
    conv+batch norm fuse into one op named after the batch norm; a kept conv fused into an fp16 op is reported."""
    s = load("example:tinycnn")
    gm = program_module(s.module, s.inputs, prec.get("fp16"))
    model, owners = coreml_target.coreml_model(gm, s.inputs, {"group_norm"})
    assert coreml_target.coreml_check(model, owners, {"group_norm"}) == ({"float16": 7, "float32": 7}, [])
    model, owners = coreml_target.coreml_model(gm, s.inputs, {"conv2d"})
    wrong = coreml_target.coreml_check(model, owners, {"conv2d"})[1]
    assert wrong == ["kept conv2d has no Core ML op here (fused into another?)"]


@slow
def test_executorch_runs_the_pte_on_executorch_as_the_users_file(planned):
    p, by, paths = planned
    e = by["executorch"]
    assert paths["executorch"].read_bytes()[4:8] == b"ET12"  # an ExecuTorch program (flatbuffer identifier)
    assert e.verified and e.backend == "executorch" and e.error <= p.tolerance
    # XNNPACK's fp16 kernels, not torch's: close, not equal. On a CPU with AVX512-FP16 XNNPACK computes in fp16 itself
    # (2.5e-3 measured on an Intel Xeon with AMX, against torch's 5.4e-4); without it, within 20% of torch's
    assert p.error / 2 <= e.error <= max(1.2 * p.error, 10 * p.error if _native_fp16() else 0)
    assert e.op_dtypes["float32"] == 2 and e.op_dtypes["float16"] >= 5
    assert "XNNPACK" in e.check


@slow
def test_litert_writes_nothing_and_says_why(planned):
    _, by, paths = planned
    e = by["litert"]
    assert not e.written and not e.verified and not paths["litert"].exists()
    assert "cannot keep chosen ops in fp32" in e.reason and "force-fp16" in e.reason


@slow
@pytest.mark.parametrize("target", ["onnx-typed", "executorch"])
def test_a_file_without_the_plans_ops_fails_its_verification(target, rmsnorm_trials, tmp_path):
    """The same writers with nothing kept in fp32: the square overflows fp16 in the file, and its run says so."""
    trials, p = rmsnorm_trials
    ctx = exports.Context(registry(), trials, frozenset(), p)
    e = exports.write(ctx, target, str(tmp_path / f"pure{exports.targets().get(target).suffix}"))
    assert e.written and not e.verified and e.runs and not e.runs[0].passed
    assert e.error is None or e.error > p.tolerance
    assert "over the tolerance" in e.reason or "inf" in e.reason or e.error == math.inf


@slow
def test_onnx_models_export_graphs_and_say_what_needs_a_torch_program(tmp_path):
    from fpdiff.onnxtools.export import export_program
    s = load("example:rmsnorm")
    export_program(torch.export.export(s.module, s.inputs, strict=False), tmp_path / "m.onnx")
    p = fpdiff.plan(str(tmp_path / "m.onnx"), backend="ort", measure_speed=False,
                    exports={"onnx-typed": str(tmp_path / "t.onnx"), "coreml": str(tmp_path / "m.mlpackage"),
                             "executorch": str(tmp_path / "m.pte")})
    typed, coreml, et = p.exports
    assert typed.verified and typed.backend == "onnxref" and typed.error <= p.tolerance
    for e in (coreml, et):
        assert not e.written and "this plan is of an ONNX model" in e.reason


@slow
def test_no_plan_no_export(tmp_path):
    out = tmp_path / "m.onnx"
    p = fpdiff.plan("example:rmsnorm", tolerance=1e-12, measure_speed=False, exports=[f"onnx-typed={out}"])
    assert not p.passed and p.exports == [] and not out.exists()


@slow
def test_cli_reports_each_export_in_terminal_and_json(tmp_path, capsys):
    report = tmp_path / "plan.json"
    args = ["plan", "example:rmsnorm", "--no-speed", "--no-store", "--json", str(report),
            "--export", f"onnx-typed={tmp_path / 't.onnx'}", "--export-onnx", str(tmp_path / "p.onnx")]
    assert main(args) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "export onnx-typed" in text and "verified on onnxref at fp16: error" in text and "<= 0.01" in text
    assert "export onnx" in text and "verified on ort at fp32" in text and "ops read back: 8 float16, 2 float32" in text
    data = json.loads(report.read_text())
    typed = next(e for e in data["exports"] if e["target"] == "onnx-typed")
    assert typed["verified"] and typed["backend"] == "onnxref" and typed["error"] <= typed["tolerance"]
    assert typed["runs"][0]["precision"] == "fp16" and typed["op_dtypes"] == {"float16": 8, "float32": 2}
    assert main(["plan", "example:rmsnorm", "--no-speed", "--no-store", "--export",
                 f"litert={tmp_path / 'm.tflite'}"]) == 1  # asked for, not written: not a verified export
    assert "export litert" in capsys.readouterr().out


@pytest.mark.parametrize("export, message", [
    ("tensorrt=m.engine", "unknown target 'tensorrt'"),
    ("onnx", "give TARGET=PATH"),
    ("onnx=/proc/no/m.onnx", "cannot write there"),
    ("executorch=m.onnx", "executorch exports are .pte files"),
])
def test_cli_bad_export_is_one_line(export, message, capsys):
    assert main(["plan", "example:rmsnorm", "--no-store", "--export", export]) == 2
    out, err = capsys.readouterr()
    assert message in err and err.count("\n") == 1 and out == ""


def test_cli_export_under_a_file_is_one_line_without_a_traceback(tmp_path):
    (tmp_path / "file").write_text("")
    p = subprocess.run([sys.executable, "-m", "fpdiff", "plan", "example:rmsnorm", "--export",
                        f"onnx={tmp_path / 'file' / 'm.onnx'}"], capture_output=True, text=True, timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(lines) == 1 and "cannot write there" in lines[0]


def test_api_targets_as_a_dict_or_strings_and_the_onnx_alias():
    assert exports.requested(["onnx=a.onnx", "executorch=b.pte"], None) == {"onnx": "a.onnx", "executorch": "b.pte"}
    assert exports.requested({"coreml": "m.mlpackage"}, "a.onnx") == {"coreml": "m.mlpackage", "onnx": "a.onnx"}
    with pytest.raises(UsageError, match="name two paths"):
        exports.requested({"onnx": "a.onnx"}, "b.onnx")
    with pytest.raises(UsageError, match="the same path"):
        exports.requested({"onnx": "a.onnx", "onnx-typed": "a.onnx"}, None)


def test_exports_survive_save_and_load_and_an_old_single_export_loads_as_onnx(tmp_path):
    plan = Plan("m", "fp16", "torch", 0.01, "g", passed=True, exports=[
        Export("onnx-typed", "t.onnx", True, True, tolerance=0.01, op_dtypes={"float16": 3},
               runs=[ExportRun("onnxref", "fp16", 1e-3, True)])])
    plan.save(tmp_path / "p.json")
    back = Plan.load(tmp_path / "p.json")
    assert back.exports == plan.exports and back.exports[0].error == 1e-3 and back.exit_code() == 0
    d = json.loads((tmp_path / "p.json").read_text())
    d.pop("exports")
    d["export"] = {"path": "old.onnx", "verified": False, "error": 0.5, "backend": "ort", "fp32_nodes": 1}
    (tmp_path / "old.json").write_text(json.dumps(d))
    old = Plan.load(tmp_path / "old.json").export
    assert (old.target, old.path, old.written, old.verified, old.backend, old.error) == ("onnx", "old.onnx", True,
                                                                                         False, "ort", 0.5)


def _keep_list(ctx: exports.Context, out, e: Export) -> None:
    """A user's own target: the kept ops, one a line (what a deployment script would read)."""
    out.write_text("".join(f"{k}\n" for k in sorted(ctx.keep)))
    e.written, e.check = True, f"{len(ctx.keep)} ops kept"


KEEP_LIST = exports.ExportTarget("keep-list", ".txt", _keep_list, "the kept ops, one a line")


@slow
def test_a_users_target_registers_as_the_built_ins_do_and_writes_through_plan(tmp_path):
    exports.register(KEEP_LIST)
    assert "keep-list" in exports.targets().names()
    path = tmp_path / "keep.txt"
    p = fpdiff.plan("example:rmsnorm", precision="fp16", measure_speed=False, exports={"keep-list": str(path)})
    (e,) = p.exports
    assert e.written and path.read_text().split() == sorted(p.kept) and e.check == f"{len(p.kept)} ops kept"
    assert not e.verified  # nothing ran the file: written, not verified
    with pytest.raises(UsageError, match="keep-list exports are .txt files"):
        exports.requested({"keep-list": str(tmp_path / "keep.csv")}, None)


@pytest.mark.parametrize("bad, message", [
    ("onnx", "an export target is an ExportTarget, not str"),
    (exports.ExportTarget("", ".x", _keep_list), "a name without '='"),
    (exports.ExportTarget("a=b", ".x", _keep_list), "a name without '='"),
    (exports.ExportTarget("x", "txt", _keep_list), "suffix 'txt' must start with '.'"),
    (exports.ExportTarget("x", ".txt", "not a function"), "write must be a function"),
])
def test_a_bad_target_declaration_is_one_line(bad, message):
    with pytest.raises(UsageError, match=message):
        exports.Targets().register(bad)


def test_a_built_in_targets_name_cannot_be_taken():
    taken = exports.ExportTarget("onnx", ".onnx", _keep_list)
    with pytest.raises(UsageError, match="export target 'onnx' from a plugin is already taken by entry point"):
        exports.targets().register(taken, "a plugin")
    assert exports.targets().get("onnx").write is not _keep_list


def _native_fp16() -> bool:
    """Whether this CPU has fp16 arithmetic (AVX512-FP16): XNNPACK then computes fp16 in fp16."""
    from fpdiff.core.versions import cpu
    return "AVX512-FP16" in cpu().split("; no ")[0]
