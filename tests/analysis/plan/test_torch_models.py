"""plan: a small verified set of ops kept in fp32, applied, saved, loaded, exported; and its refusals. Trials, the
speed figure and the autocast remedy are the named backend's own numbers, from jobs in a worker."""
import json

import onnx
import pytest
import torch

import fpdiff
from conftest import PLUGINS, SPECS
from fpdiff.analysis.plan.search import PLAN_FORMAT
from fpdiff.cli import main
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.sources import load

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast

DEMOD = str(SPECS / "demod_underflow.py")
LLAMA = str(SPECS / "plan_rotary_llama.py")


def test_underflow_gets_a_few_ops_that_pass():
    p = fpdiff.plan(DEMOD, precision="fp16", measure_speed=False)
    assert p.pure_error == float("inf")  # fp16 alone: w*w flushes, rsqrt(0) = inf
    assert p.passed and p.error <= p.tolerance
    assert p.verification is None  # torch eager computes fp16 itself: its trials verify
    kept = [k.node for k in p.keep]
    assert "mul" in kept and len(kept) <= 3  # the square that underflows, and what reads its tiny results
    assert p.low_fraction > 0.8 and p.evaluations <= 8
    first = next(k for k in p.keep if k.node == "mul")
    assert first.source.endswith("demod_underflow.py:15") and any("flushed" in w for w in first.why)
    # every kept op is needed: dropping any one fails (the search's last pass checked exactly that)
    by_keep = {tuple(t.keep): t for t in p.trials}
    for k in kept:
        rest = tuple(sorted(set(kept) - {k}))
        assert rest in by_keep and not by_keep[rest].passed


def test_a_model_that_passes_gets_an_empty_plan_in_one_evaluation():
    p = fpdiff.plan("example:tinyformer", precision="fp16", measure_speed=False)
    assert p.passed and p.keep == [] and p.evaluations == 1 and p.analyses == []
    assert p.autocast is None  # nothing failed: no remedy to try


def test_saved_loaded_and_applied_plan_gives_the_same_outputs(tmp_path):
    path = tmp_path / "plan.json"
    p = fpdiff.plan("example:rmsnorm", precision="fp16", save=str(path), measure_speed=False)
    assert p.passed and {k.node for k in p.keep} == {"mul", "mean"}
    s = load("example:rmsnorm")
    applied = fpdiff.apply_plan(s.module, str(path), s.inputs)
    again = fpdiff.apply_plan(s.module, fpdiff.Plan.load(path), s.inputs)
    with torch.no_grad():
        a, b = applied(*s.inputs), again(*s.inputs)
        exact = s.module.double()(*(t.double() for t in s.inputs))
    assert torch.equal(a, b)
    err = float((a.double() - exact).norm() / exact.norm())
    assert err == pytest.approx(p.error, rel=1e-6)
    reverified = fpdiff.plan("example:rmsnorm", precision="fp16", load=str(path), measure_speed=False)
    assert reverified.passed and reverified.error == pytest.approx(p.error, rel=1e-6)
    assert reverified.evaluations == 2  # the pure precision (for the report) and the plan


def test_autocast_is_tried_when_the_pure_precision_fails():
    p = fpdiff.plan("example:rmsnorm", precision="fp16")
    a = p.autocast
    assert a.precision == "amp-fp16" and a.passed is False and a.backend == "torch"  # CPU autocast: x*x in fp16
    assert a.ms > 0 and a.fp32_ms == p.speed.ms["fp32"]  # timed in the same worker as the speed figure
    assert fpdiff.plan("example:rmsnorm", precision="fp16", measure_speed=False).autocast.ms is None


def test_impossible_tolerance_says_so_with_the_best_error(capsys):
    p = fpdiff.plan("example:rmsnorm", precision="fp16", tolerance=1e-12, measure_speed=False)
    assert not p.passed and p.keep == []
    assert "even every op in fp32" in p.message and p.error == pytest.approx(p.fp32_error)
    assert main(["plan", "example:rmsnorm", "--tolerance", "1e-12", "--no-speed"]) == 1
    assert "no plan" in capsys.readouterr().out


def test_plan_for_another_model_is_refused(tmp_path, capsys):
    path = tmp_path / "plan.json"
    fpdiff.plan("example:rmsnorm", precision="fp16", save=str(path), measure_speed=False)
    with pytest.raises(UsageError, match="made for example:rmsnorm"):
        fpdiff.plan(DEMOD, precision="fp16", load=str(path))
    s = load("example:tinycnn")
    with pytest.raises(UsageError, match="made for example:rmsnorm"):
        fpdiff.apply_plan(s.module, str(path), s.inputs)
    assert main(["plan", DEMOD, "--load", str(path)]) == 2
    err = capsys.readouterr().err
    assert "made for example:rmsnorm" in err and err.count("\n") == 1


@pytest.mark.parametrize("content, message", [("{not json", "not JSON"), ('{"a": 1}', "not an fpdiff plan")])
def test_bad_plan_files(tmp_path, content, message):
    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        fpdiff.plan("example:rmsnorm", load=str(path))
    with pytest.raises(UsageError, match="not found"):
        fpdiff.plan("example:rmsnorm", load=str(tmp_path / "missing.json"))


@pytest.mark.parametrize("args, message", [
    (["--precision", "fp32"], "fp16 or bf16"),
    (["--tolerance", "-1"], "positive"),
    (["--backend", "tensorrt"], "unknown backend"),
])
def test_cli_bad_input_is_one_line(args, message, capsys):
    assert main(["plan", "example:rmsnorm", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_export_onnx_keeps_the_plan_in_fp32_and_verifies_it(tmp_path):
    out = tmp_path / "planned.onnx"
    p = fpdiff.plan("example:rmsnorm", precision="fp16", export_onnx=str(out), measure_speed=False)
    e = p.export
    assert e.target == "onnx" and e.written and e.verified and e.error <= p.tolerance
    assert e.op_dtypes["float32"] >= 2 and e.op_dtypes["float16"] > e.op_dtypes["float32"]
    assert e.backend == "ort"  # torch eager runs no ONNX graph: the ONNX cross-check verifies it
    assert [f.name for f in tmp_path.iterdir()] == ["planned.onnx"]
    m = onnx.load(str(out))
    assert any(n.op_type == "Cast" for n in m.graph.node)
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # fp32 in, like the model


def test_plan_verified_on_inductor_with_its_own_autocast_and_speed():
    """Trials, the speed figure and the autocast remedy are inductor's: the remedy's error is the one check reports
    for inductor's amp-fp16 cell (the job check sends for it), not torch eager's."""
    p = fpdiff.plan(DEMOD, precision="fp16", backend="inductor")
    assert p.passed and 0 < len(p.keep) <= 3 and p.error <= p.tolerance
    cell = fpdiff.check(DEMOD, backends=["inductor"], precisions=["amp-fp16"], shape_variants=["static"]).cells[0]
    a = p.autocast
    assert a.backend == "inductor" and a.status is None and a.ms > 0
    assert a.error == pytest.approx(cell.metrics["rel_l2"], rel=1e-6)
    assert p.speed.where == "inductor cpu" and p.speed.ms["plan"] > 0 and a.fp32_ms == p.speed.ms["fp32"]


def test_cli_json_and_speed(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", DEMOD, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "verified plan" in text and "speed (torch cpu)" in text  # the backend that ran it, on its device
    data = json.loads(out.read_text())
    assert data["fpdiff_plan"] == PLAN_FORMAT and data["passed"] and data["speed"]["ms"]["plan"] > 0
    assert set(data["speed"]["ms"]) == {"fp32", "fp16", "plan"} and data["speed"]["where"] == "torch cpu"


def test_a_backend_refusing_the_precision_is_said_plainly():
    p = fpdiff.plan("example:rmsnorm", precision="bf16", backend="ort", measure_speed=False)
    assert p.pure_status == Status.UNSUPPORTED and "Gemm" in p.pure_reason  # ORT CPU: no bf16 Gemm
    assert p.passed and len(p.keep) == p.units and "every op stays fp32" in p.message and "Gemm" in p.message
    assert p.autocast.status == Status.UNSUPPORTED and p.autocast.backend == "ort"  # its own amp cell, refused


def test_unwritable_outputs_lose_nothing(capsys):
    assert main(["plan", "example:rmsnorm", "--no-speed", "--save", "/proc/no/plan.json"]) == 2
    out, err = capsys.readouterr()
    assert "verified plan" in out and "cannot write the plan" in err and err.count("\n") == 1
    assert main(["plan", "example:rmsnorm", "--no-speed", "--export-onnx", "/proc/no/x.onnx"]) == 2
    out, err = capsys.readouterr()  # refused before any work: no plan searched for a file that cannot be written
    assert "cannot write there" in err and err.count("\n") == 1 and "verified plan" not in out


def test_rotary_decoder_gets_a_plan_and_every_trial_runs():
    """A transformers Llama (rotary embeddings, RMSNorm's own casts): a tolerance below pure fp16's error makes
    the search run many keep-sets, each one a program that must run (they used to fail torch's dtype asserts)."""
    pure = fpdiff.plan(LLAMA, precision="fp16", measure_speed=False)
    assert pure.passed and pure.keep == [] and pure.evaluations == 1
    tol = pure.pure_error / 3
    p = fpdiff.plan(LLAMA, precision="fp16", tolerance=tol, measure_speed=False)
    assert all(t.status == Status.OK and t.error < 1 for t in p.trials)
    assert p.passed and 0 < len(p.keep) < p.units and p.error <= tol
    s = load(LLAMA)
    applied = fpdiff.apply_plan(s.module, p, s.inputs)  # the plan applies to the model it was made for
    with torch.no_grad():
        assert applied(*s.inputs).dtype == torch.float32


def test_rotary_decoder_trials_on_a_backend_in_a_worker():
    p = fpdiff.plan(LLAMA, precision="fp16", backend="ort", measure_speed=False)
    assert p.pure_status == Status.OK and p.passed and p.error <= p.tolerance


def test_an_fp16_only_branch_is_planned_as_check_runs_it(capsys):
    """The model clamps at fp16 only: the program at fp16 fails whatever is kept in fp32, and plan says so
    (a plan made from the fp32 export passed, empty, on a model without the clamp)."""
    p = fpdiff.plan(str(SPECS / "plan_fp16_clamp.py"), precision="fp16", measure_speed=False)
    assert not p.passed and p.pure_error > 0.5 and p.fp32_error > 0.5
    assert main(["plan", str(SPECS / "plan_fp16_clamp.py"), "--no-speed", "--no-store"]) == 1
    assert "no plan meets" in capsys.readouterr().out


def test_a_model_torch_export_cannot_take_at_fp16_is_refused_in_one_line(capsys):
    """BART's branch (clamp when fp16 values are not all finite) is data-dependent at fp16: one line, exit 2."""
    assert main(["plan", str(SPECS / "plan_fp16_clamp_if_inf.py"), "--no-store"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "cannot export this model at fp16" in err and "clamp_if_inf.py:14" in err


def test_an_internal_error_is_one_line(capsys, monkeypatch):
    """A bug of fpdiff's own reaches the user as one line (the traceback with --debug)."""
    from fpdiff.analysis.plan import exports

    def broken(*a, **k):
        raise KeyError("no_such_node")
    monkeypatch.setattr(exports, "requested", broken)  # a step inside plan(), as the CLI reaches it
    assert main(["plan", "example:rmsnorm", "--no-store"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error in fpdiff: KeyError" in err
    with pytest.raises(KeyError):
        main(["--debug", "plan", "example:rmsnorm", "--no-store"])


def test_trials_speed_and_autocast_are_the_named_backends_own():
    """A plugin that shifts every output by a known relative L2 sees exactly that in every trial: no trial, no
    timing and no remedy is computed by another implementation under its name."""
    shift = 0.25
    p = fpdiff.plan("example:rmsnorm", precision="fp16", backend="shifted", plugins=(str(PLUGINS / "shifted.py"),),
                    backend_flags={"shifted": [f"shift={shift}"]}, tolerance=0.3)
    assert p.backend == "shifted" and p.trials and all(t.status == Status.OK for t in p.trials)
    assert p.fp32_error is None or p.fp32_error == pytest.approx(shift, rel=1e-3)
    assert p.passed and p.error == pytest.approx(shift, rel=2e-2)  # its keep-set meets 0.3 with its shift in
    assert p.speed.where == "shifted cpu" and set(p.speed.ms) == {"fp32", "fp16", "plan"}
    # its own amp cell, timed beside its fp32 program (tests/backends/test_shifted.py checks the remedy's error)
    assert p.autocast.backend == "shifted" and p.autocast.ms > 0 and p.autocast.fp32_ms == p.speed.ms["fp32"]


def test_a_backend_whose_trials_all_fail_is_said_plainly(capsys):
    """Every trial crashes the worker: each crash costs that trial, and the plan says the backend ran none."""
    plugin = str(PLUGINS / "misbehave.py")
    p = fpdiff.plan("example:rmsnorm", precision="fp16", backend="dies", plugins=(plugin,), measure_speed=False)
    assert not p.passed and p.keep == [] and all(t.status == Status.CRASH for t in p.trials)
    assert p.message.startswith(f"no plan: dies ran none of the {p.evaluations} trials (crash: ")
    assert p.autocast.status == Status.CRASH
    assert main(["plan", "example:rmsnorm", "--backend", "dies", "--plugin", plugin, "--no-speed", "--no-store"]) == 1
    out = capsys.readouterr().out
    assert "ran none of the" in out
    assert "inf/NaN" not in out and p.fp32_error is None  # a trial that did not run measured no error


def test_speed_on_onnx_runtime_is_labelled_with_it():
    """ORT's CPU provider computes fp16 in float32: every keep-set that passes on it runs again in torch eager at
    fp16 (the judge), which the plan names; the speed figure stays ORT's own."""
    p = fpdiff.plan(DEMOD, precision="fp16", backend="ort")
    assert p.passed and p.speed.where == "ort cpu" and set(p.speed.ms) == {"fp32", "fp16", "plan"}
    assert all(v > 0 for v in p.speed.ms.values()) and p.speed.plan_vs_fp32 > 0
    v = p.verification
    assert v.backend == "torch" and v.wider.startswith("ort computes fp16 wider: ort ran ")
    assert v.error <= p.tolerance and (v.pure_error is None or v.pure_error > p.tolerance)  # pure fp16 fails


def test_old_saved_statuses_still_load(tmp_path):
    """Plans saved before a trial's reason had its own field wrote "unsupported: why" as its status."""
    path = tmp_path / "plan.json"
    fpdiff.plan("example:rmsnorm", precision="fp16", save=str(path), measure_speed=False)
    d = json.loads(path.read_text())
    d["pure_status"] = "unsupported: no kernel"
    d.pop("pure_reason")
    d["trials"][0].update(status="crash: backend process died", passed=False)
    d["trials"][0].pop("reason")
    path.write_text(json.dumps(d))
    p = fpdiff.Plan.load(path)
    assert (p.pure_status, p.pure_reason) == (Status.UNSUPPORTED, "no kernel")
    assert (p.trials[0].status, p.trials[0].reason) == (Status.CRASH, "backend process died")


def test_export_without_onnxruntime_says_so_and_the_plan_stands(tmp_path, monkeypatch, capsys):
    """onnxruntime is an extra: where it does not import, the export is written, not verified, and says which extra
    verifies it; the plan itself is unchanged. (The parent never imports it: the verifying run is a worker's.)"""
    fake = tmp_path / "no_ort"
    (fake / "onnxruntime").mkdir(parents=True)
    (fake / "onnxruntime" / "__init__.py").write_text("raise ImportError('onnxruntime is not installed')\n")
    monkeypatch.setenv("PYTHONPATH", f"{fake}:{__import__('os').environ.get('PYTHONPATH', '')}")
    out = tmp_path / "planned.onnx"
    p = fpdiff.plan("example:rmsnorm", precision="fp16", export_onnx=str(out), measure_speed=False)
    assert p.passed and {k.node for k in p.keep} == {"mul", "mean"} and out.exists()
    e = p.export
    assert e.written and not e.verified and e.backend == "ort" and e.error is None
    assert e.runs[0].reason.startswith("unsupported") and "pip install 'fpdiff[ort]'" in e.reason
    assert main(["plan", "example:rmsnorm", "--no-speed", "--no-store", "--export-onnx", str(out)]) == 1
    text = " ".join(capsys.readouterr().out.split())  # the terminal wraps long lines
    assert "verified plan" in text and "NOT verified on ort" in text and "fpdiff[ort]" in text
