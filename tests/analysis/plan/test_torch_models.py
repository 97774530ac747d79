"""plan: a small verified set of ops kept in fp32, applied, saved, loaded, exported; and its refusals."""
import json

import onnx
import pytest
import torch

import fpdiff
from conftest import SPECS
from fpdiff.analysis.plan.search import PLAN_FORMAT
from fpdiff.cli import main
from fpdiff.core.errors import UsageError
from fpdiff.sources import load

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast

DEMOD = str(SPECS / "demod_underflow.py")
LLAMA = str(SPECS / "plan_rotary_llama.py")


def test_underflow_gets_a_few_ops_that_pass():
    p = fpdiff.plan(DEMOD, precision="fp16", measure_speed=False)
    assert p.pure_error == float("inf")  # fp16 alone: w*w flushes, rsqrt(0) = inf
    assert p.passed and p.error <= p.tolerance
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
    p = fpdiff.plan("example:rmsnorm", precision="fp16", measure_speed=False)
    a = p.autocast
    assert a.precision == "amp-fp16" and a.passed is False  # CPU autocast leaves x*x in fp16 here
    assert a.ms > 0 and a.fp32_ms > 0


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
    assert e.verified and e.error <= p.tolerance and e.fp32_nodes >= 2 and e.low_nodes > e.fp32_nodes
    m = onnx.load(str(out))
    assert any(n.op_type == "Cast" for n in m.graph.node)
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # fp32 in, like the model


def test_plan_verified_on_inductor():
    p = fpdiff.plan(DEMOD, precision="fp16", backend="inductor", measure_speed=False)
    assert p.passed and 0 < len(p.keep) <= 3 and p.error <= p.tolerance


def test_cli_json_and_speed(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", DEMOD, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "verified plan" in text and "speed (torch eager cpu)" in text
    data = json.loads(out.read_text())
    assert data["fpdiff_plan"] == PLAN_FORMAT and data["passed"] and data["speed"]["ms"]["plan"] > 0


def test_a_backend_refusing_the_precision_is_said_plainly():
    p = fpdiff.plan("example:rmsnorm", precision="bf16", backend="ort", measure_speed=False)
    assert p.pure_status.startswith("unsupported") and "Gemm" in p.pure_status  # ORT CPU: no bf16 Gemm
    assert p.passed and len(p.keep) == p.units and "every op stays fp32" in p.message
    assert p.autocast.status == "unsupported"  # tried as the remedy, refused with its reason


def test_unwritable_outputs_lose_nothing(capsys):
    assert main(["plan", "example:rmsnorm", "--no-speed", "--save", "/proc/no/plan.json"]) == 2
    out, err = capsys.readouterr()
    assert "verified plan" in out and "cannot write the plan" in err and err.count("\n") == 1
    assert main(["plan", "example:rmsnorm", "--no-speed", "--export-onnx", "/proc/no/x.onnx"]) == 1
    assert "cannot write" in capsys.readouterr().out


def test_rotary_decoder_gets_a_plan_and_every_trial_runs():
    """A transformers Llama (rotary embeddings, RMSNorm's own casts): a tolerance below pure fp16's error makes
    the search run many keep-sets, each one a program that must run (they used to fail torch's dtype asserts)."""
    pure = fpdiff.plan(LLAMA, precision="fp16", measure_speed=False)
    assert pure.passed and pure.keep == [] and pure.evaluations == 1
    tol = pure.pure_error / 3
    p = fpdiff.plan(LLAMA, precision="fp16", tolerance=tol, measure_speed=False)
    assert all(t.status == "ok" and t.error < 1 for t in p.trials)
    assert p.passed and 0 < len(p.keep) < p.units and p.error <= tol
    s = load(LLAMA)
    applied = fpdiff.apply_plan(s.module, p, s.inputs)  # the plan applies to the model it was made for
    with torch.no_grad():
        assert applied(*s.inputs).dtype == torch.float32


def test_rotary_decoder_trials_on_a_backend_in_a_worker():
    p = fpdiff.plan(LLAMA, precision="fp16", backend="ort", measure_speed=False)
    assert p.pure_status == "ok" and p.passed and p.error <= p.tolerance


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
    import fpdiff.api

    def broken(*a, **k):
        raise KeyError("no_such_node")
    monkeypatch.setattr(fpdiff.api, "plan", broken)
    assert main(["plan", "example:rmsnorm", "--no-store"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error in fpdiff: KeyError" in err
    with pytest.raises(KeyError):
        main(["--debug", "plan", "example:rmsnorm", "--no-store"])
