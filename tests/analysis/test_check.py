"""The grid on real backends: the seed scenarios of the check command."""
import numpy as np
import pytest

import fpdiff
from conftest import PLUGINS, SPECS

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast


def cells(result, **match):
    return [c for c in result.cells if all(getattr(c, k) == v for k, v in match.items())]


def one(result, **match):
    found = cells(result, **match)
    assert len(found) == 1, (match, [(c.backend, c.precision, c.shape_variant) for c in result.cells])
    return found[0]


@pytest.mark.parametrize("example", ["tinycnn", "tinyformer", "rmsnorm", "router"])
def test_fp32_examples_never_mismatch_on_any_backend(example):
    r = fpdiff.check(f"example:{example}", backends=["torch", "inductor", "ort", "iree"], precisions=["fp32"])
    for c in r.cells:
        assert c.status == "pass", (c.backend, c.status, c.reason)
        assert c.metrics["rel_l2"] < 1e-5
    assert r.exit_code() == 0


def test_iree_fp64_really_computes_in_float64():
    r = fpdiff.check(str(SPECS / "f64_mul.py"), backends=["iree"], precisions=["fp64"])
    c = one(r, backend="iree")
    assert c.status == "pass", c.reason
    assert c.computed_dtype == "float64"
    assert c.output_dtypes == ["float64"]
    assert "--iree-input-demote-f64-to-f32=false" in c.info["flags"]
    assert not [f for f in c.findings if f.kind == "dtype-changed"]
    # fp32 would lose the low digits of a*b ~ 1e9: this model can tell f64 from f32 apart
    assert c.metrics["max_abs"] < 1e-6


def test_iree_user_flags_that_keep_demotion_give_dtype_changed_with_the_flag_as_remedy():
    r = fpdiff.check(str(SPECS / "f64_mul.py"), backends=["iree"], precisions=["fp64"],
                     iree_flags=["--iree-input-demote-f64-to-f32=true"])
    c = one(r, backend="iree")
    changed = [f for f in c.findings if f.kind == "dtype-changed"]
    assert changed, (c.status, c.reason, c.findings)
    assert "--iree-input-demote-f64-to-f32=false" in changed[0].remedy
    assert c.status != "pass"


def test_op_without_kernel_in_a_dtype_is_unsupported_naming_op_and_remedy_that_works():
    r = fpdiff.check("example:tinycnn", backends=["ort", "torch"], precisions=["fp32", "bf16", "amp-bf16"])
    c = one(r, backend="ort", precision="bf16")
    assert c.status == "unsupported"
    f = [f for f in c.findings if f.kind == "unsupported"][0]
    assert f.op and f.op.split()[0] == "Conv"  # ONNX Runtime's CPU provider has no bf16 Conv
    assert "ort" in f.message and "bf16" in f.message
    assert "amp-bf16" in f.remedy
    # the remedy works: the model under autocast bf16 meets the bf16 tolerance
    assert one(r, backend="torch", precision="amp-bf16").status == "pass"
    assert r.exit_code() == 0  # unsupported is not a failure


def test_ort_fp16_scatter_add_is_unsupported_and_autocast_runs_it():
    r = fpdiff.check(str(SPECS / "scatter_add_pool.py"), backends=["ort", "torch"],
                     precisions=["fp32", "fp16", "amp-fp16"])
    c = one(r, backend="ort", precision="fp16")
    assert c.status == "unsupported"
    f = [f for f in c.findings if f.kind == "unsupported"][0]
    assert f.op.startswith(("ScatterND", "ScatterElements")) and "fp16" in f.message
    assert "amp-fp16" in f.remedy
    assert one(r, backend="ort", precision="fp32").status == "pass"
    assert one(r, backend="torch", precision="amp-fp16").status == "pass"


def test_mixed_static_dynamic_variants_run_on_ort_and_iree():
    r = fpdiff.check("example:router", backends=["ort", "iree"], precisions=["fp32"])
    variants = {c.shape_variant for c in r.cells}
    assert variants == {"static", "dynamic", "mixed:tokens-static", "mixed:top_k-static"}
    for c in r.cells:
        assert c.status == "pass", (c.backend, c.shape_variant, c.reason)


def test_plugin_that_perturbs_one_op_is_mismatch_and_honest_plugin_passes():
    r = fpdiff.check("example:tinyformer", backends=["perturb", "honest"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "perturb.py")], shape_variants=["static", "dynamic"])
    for c in cells(r, backend="perturb"):
        assert c.status == "mismatch", c.reason
        assert c.metrics["rel_l2"] > 1e-4
    for c in cells(r, backend="honest"):
        assert c.status == "pass", c.reason
    assert r.exit_code() == 1


def test_crash_timeout_and_unavailable_backends_cost_one_cell_each():
    r = fpdiff.check("example:tinycnn", backends=["dies", "hangs", "absent", "torch"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "misbehave.py")], timeout=20)
    assert one(r, backend="dies").status == "crash"
    assert "exit code 3" in one(r, backend="dies").reason
    assert one(r, backend="hangs").status == "timeout"
    absent = one(r, backend="absent")
    assert absent.status == "unsupported" and "hardware" in absent.reason
    assert one(r, backend="torch").status == "pass"  # the grid went on
    assert r.exit_code() == 1


def test_fp16_overflow_inside_an_op_is_precision_loss_not_mismatch():
    r = fpdiff.check("example:rmsnorm", backends=["torch", "iree"], precisions=["fp16", "bf16"])
    t = one(r, backend="torch", precision="fp16")
    assert t.status == "precision-loss"  # the baseline itself: fp16 is too coarse, no backend is wrong
    assert one(r, backend="torch", precision="bf16").status == "pass"
    assert one(r, backend="iree", precision="fp16").status in ("precision-loss", "unsupported")


def test_cuda_precisions_without_a_gpu_are_unsupported_with_reason():
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the cells would run")
    r = fpdiff.check("example:tinycnn", backends=["torch"], precisions=["tf32", "fp32"], devices=["cpu", "cuda"])
    tf32 = one(r, device="cpu", precision="tf32")
    assert tf32.status == "unsupported" and "CUDA" in tf32.reason
    assert one(r, device="cuda", precision="fp32").status == "unsupported"
    assert one(r, device="cpu", precision="fp32").status == "pass"


def test_inductor_runs_every_shape_variant():
    r = fpdiff.check("example:tinyformer", backends=["inductor"], precisions=["fp32"])
    assert len(r.cells) == 4
    for c in r.cells:
        assert c.status == "pass", (c.shape_variant, c.reason)


def test_compile_cache_is_reused_on_a_second_run(tmp_path):
    kw = dict(backends=["iree"], precisions=["fp16"], cache_dir=str(tmp_path))
    first = fpdiff.check("example:tinycnn", **kw)
    second = fpdiff.check("example:tinycnn", **kw)
    assert one(first, backend="iree").info["cache"] == "miss"
    assert one(second, backend="iree").info["cache"] == "hit"
    assert one(first, backend="iree").metrics == one(second, backend="iree").metrics


def test_inductor_autocast_cells_really_run_their_own_dtype():
    r = fpdiff.check("example:tinyformer", backends=["torch", "inductor"], precisions=["amp-fp16", "amp-bf16"],
                     shape_variants=["static"])
    for p in ("amp-fp16", "amp-bf16"):
        eager, compiled = one(r, backend="torch", precision=p), one(r, backend="inductor", precision=p)
        ratio = compiled.metrics["rel_l2"] / eager.metrics["rel_l2"]
        assert 0.25 < ratio < 4, (p, compiled.metrics["rel_l2"], eager.metrics["rel_l2"])
    # bf16 keeps 8 mantissa bits, fp16 11: the bf16 cell must be clearly less accurate
    assert one(r, backend="inductor", precision="amp-bf16").metrics["rel_l2"] > \
        3 * one(r, backend="inductor", precision="amp-fp16").metrics["rel_l2"]


def test_a_variant_that_departs_is_named_as_variant_disagreement():
    r = fpdiff.check("example:tinyformer", backends=["dynbug"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "perturb.py")])
    assert one(r, shape_variant="static").status == "pass"
    for v in ("dynamic", "mixed:batch-static", "mixed:seq-static"):
        c = one(r, shape_variant=v)
        assert c.status == "mismatch"
        f = [f for f in c.findings if f.kind == "variant-disagreement"]
        assert f and "static" in f[0].message and v in f[0].message


def test_a_backend_computing_bf16_when_asked_fp16_is_not_a_silent_pass():
    r = fpdiff.check("example:tinycnn", backends=["downcast", "honest"], precisions=["fp16"],
                     plugins=[str(PLUGINS / "downcast.py")])
    bad, good = one(r, backend="downcast"), one(r, backend="honest")
    assert bad.status == "pass"  # under tolerance: the verdict alone would say nothing
    f = [f for f in bad.findings if f.kind == "coarser-than-requested"]
    assert f and "bf16" in f[0].message, bad.findings
    assert bad.effective_bits < 9.5 and good.effective_bits > 10.5
    assert not [f for f in good.findings if f.kind == "coarser-than-requested"]
    assert r.exit_code() == 0 and r.exit_code(strict=True) == 1


def test_nondeterministic_outputs_are_flagged_and_the_first_run_judged():
    r = fpdiff.check("example:tinycnn", backends=["flaky", "torch"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "misbehave.py")])
    flaky = one(r, backend="flaky")
    assert [f.kind for f in flaky.findings if f.kind == "nondeterministic"], flaky.findings
    assert not [f for f in one(r, backend="torch").findings if f.kind == "nondeterministic"]
    once = fpdiff.check("example:tinycnn", backends=["flaky"], precisions=["fp32"], repeat=1,
                        plugins=[str(PLUGINS / "misbehave.py")])
    assert not [f for f in once.cells[0].findings if f.kind == "nondeterministic"]


def test_a_component_failing_is_an_error_charged_to_it_not_unsupported():
    r = fpdiff.check("example:tinycnn", backends=["broken-compiler", "wrong-type"], precisions=["fp32"],
                     plugins=[str(PLUGINS / "misbehave.py")])
    c = one(r, backend="broken-compiler")
    assert (c.status, c.stage, c.component) == ("error", "compile", "plugin broken-compiler"), c.reason
    assert "AssertionError" in c.reason and "lowering pass lost a buffer" in c.reason
    assert "\x1b" not in c.reason and "\x1b" not in c.info.get("log_tail", "")
    w = one(r, backend="wrong-type")
    assert (w.status, w.stage, w.component) == ("error", "run", "wrong-type"), w.reason
    assert "internal" not in w.reason
    assert r.exit_code() == 1


def test_a_backend_rounding_more_at_the_same_dtype_is_told_so_not_called_bf16():
    """IREE's fp16 LayerNorm: every compiled float op is fp16 and the error is ~5x torch's (statistics in fp16).
    The cell passes; the finding says it rounds more at the same dtype (rounds-more), not that it computed in a
    narrower format, and --strict does not fail on it."""
    r = fpdiff.check(str(SPECS / "wide_layernorm.py"), backends=["iree", "torch"], precisions=["fp16"])
    c = one(r, backend="iree")
    assert c.status == "pass", c.reason
    kinds = [f.kind for f in c.findings]
    assert "rounds-more" in kinds and "coarser-than-requested" not in kinds, c.findings
    more = next(f for f in c.findings if f.kind == "rounds-more")
    assert "no compiled op in a dtype narrower than float16" in more.message and "bf16?" not in more.message
    assert not one(r, backend="torch").findings
    assert r.exit_code(strict=True) == 0


def test_a_run_that_judged_nothing_says_so_and_exits_3(capsys, tmp_path):
    """ORT's CPU provider has no bf16 Conv: the only cell is unsupported, so no cell reached a verdict. Exit 0
    ("nothing failed") would read as "the numbers hold"."""
    from fpdiff import cli
    from fpdiff.core.status import NOTHING_JUDGED
    code = cli.main(["check", "example:tinycnn", "--backends", "ort", "--precisions", "bf16", "--no-store",
                     "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert code == NOTHING_JUDGED == 3
    assert "nothing was judged: no cell of 1 reached a verdict (1 unsupported)" in out
    r = fpdiff.check("example:tinycnn", backends=["ort"], precisions=["bf16", "fp32"])
    assert r.judged() == 1 and r.exit_code() == 0 and r.nothing_judged() is None


def test_outputs_near_1e_165_are_measured_not_read_as_exact():
    """Squares of 1e-165 underflow: norms of raw values read an all-zero output as rel L2 0, a pass. At fp64 the
    values are representable and a backend that demotes to float32 inside returns zeros: a mismatch. fp32 cannot hold
    them and its baseline flushes them too: precision-loss with an underflow finding, never a pass."""
    r = fpdiff.check(str(SPECS / "tiny_scale_outputs.py"), backends=["torch", "ort", "demote-f64"],
                     precisions=["fp64", "fp32"], plugins=[str(PLUGINS / "demote_f64.py")])
    demoted = one(r, backend="demote-f64", precision="fp64")
    assert demoted.status == "mismatch" and demoted.metrics["rel_l2"] == 1.0, demoted.reason
    assert one(r, backend="ort", precision="fp64").status == "pass"
    for c in cells(r, precision="fp32"):
        assert c.status == "precision-loss" and c.metrics["rel_l2"] == 1.0, (c.backend, c.reason)
        assert any(f.kind == "underflow" for f in c.findings)
    assert r.exit_code() == 1


def test_an_argmax_output_is_judged_by_flips_and_never_put_in_the_norm():
    r = fpdiff.check(str(SPECS / "argmax_head.py"), backends=["torch", "ort"], precisions=["fp32", "bf16"])
    for c in r.cells:
        if c.status == "unsupported":
            continue
        assert c.metrics["discrete"] == 256 and c.metrics["numel"] == 2560, c.metrics
        assert c.status in ("pass", "precision-loss"), (c.backend, c.precision, c.reason)
        assert "integer/boolean output values" in c.reason
    fp32 = one(r, backend="ort", precision="fp32")
    assert fp32.status == "pass" and fp32.metrics["flips"] == 0


def test_an_exporter_computing_another_function_is_its_error_not_the_backends():
    """fp32 alone (no fp64 cell in the grid): the float64 export's check is run for the mismatch and blames
    torch.onnx, whose graph drops divisor_override; ORT computed that graph right."""
    r = fpdiff.check(str(SPECS / "avgpool_divisor.py"), backends=["ort"], precisions=["fp32"])
    c = one(r, backend="ort", precision="fp32")
    assert c.status == "error" and c.component == "torch.onnx" and "another function" in c.reason, c.reason
    assert [(v.rule, v.now) for v in c.revisions] == [("float64", "mismatch"), ("exporter", "error")]


def test_ort_runs_bfloat16_inputs_and_outputs():
    """ONNX Runtime's numpy binding takes no bfloat16 array: fpdiff feeds and reads its own values."""
    r = fpdiff.check(str(SPECS / "adaptive_pool.py"), backends=["ort"], precisions=["bf16"])
    c = one(r, backend="ort", precision="bf16")
    assert c.status == "pass", c.reason
    assert c.output_dtypes == ["bfloat16"]


def test_an_onnx_graph_with_symbolic_dims_runs_static_pinned_and_dynamic_as_written(tmp_path):
    """The exporter's symbolic dims are two shape variants: the static cell hands each backend the graph with every
    dim pinned (OpenVINO and IREE convert it with all shapes known), the dynamic cell the graph as written."""
    import onnx

    import onnx_models as om
    path = tmp_path / "sym.onnx"
    onnx.save(om.symbolic_conv(), str(path))
    np.savez(tmp_path / "in.npz", x=np.random.default_rng(0).standard_normal((3, 2, 9)).astype(np.float32),
             b=np.ones((3, 3), np.float32))
    r = fpdiff.check(str(path), backends=["ort", "openvino"], precisions=["fp32"], inputs=str(tmp_path / "in.npz"))
    assert sorted((c.backend, c.shape_variant) for c in r.cells) == [
        ("openvino", "dynamic"), ("openvino", "static"), ("ort", "dynamic"), ("ort", "static")]
    for c in r.cells:
        assert c.status == "pass", (c.backend, c.shape_variant, c.reason)


def test_a_cell_that_computed_wider_says_whether_the_model_survives_the_precision_itself(tmp_path):
    """ORT's CPU runs this fp16 graph in fp32 and is right; the model's variance overflows in real fp16 arithmetic.
    The cell keeps its verdict (ORT computed what it computed) and says the model does not survive fp16."""
    import onnx_models as om
    path = om.save(om.overflowing_norm(), tmp_path / "ln.onnx")
    np.savez(tmp_path / "in.npz", x=(np.random.default_rng(1).standard_normal((2, 64)) * 400).astype(np.float32))
    r = fpdiff.check(path, backends=["ort"], precisions=["fp16", "fp32"], inputs=str(tmp_path / "in.npz"))
    fp16, fp32 = one(r, backend="ort", precision="fp16"), one(r, backend="ort", precision="fp32")
    assert fp16.status == "pass" and any(f.kind == "dtype-changed" for f in fp16.findings), fp16.reason
    unsafe = [f for f in fp16.findings if f.kind == "precision-unsafe"]
    assert unsafe and "does not survive" in fp16.reason, fp16.reason
    assert not any(f.kind == "precision-unsafe" for f in fp32.findings)


def test_a_backend_that_reports_fp16_and_computes_fp32_is_told_by_its_numbers():
    """The widen plugin says float16 and computes float32 (OpenVINO's bf16 hint on a CPU without bf16 arithmetic):
    its numbers decide. `example:rmsnorm` is not fp16-safe (x*x overflows), so the cell that passes is also told
    the model does not survive fp16, and --strict fails it."""
    r = fpdiff.check("example:rmsnorm", backends=["torch", "widen"], precisions=["fp16"],
                     plugins=[str(PLUGINS / "widen.py")])
    cell = one(r, backend="widen", precision="fp16")
    kinds = [f.kind for f in cell.findings]
    assert cell.status == "pass" and "computed-wider" in kinds and "precision-unsafe" in kinds, (cell.reason, kinds)
    assert cell.computed_dtype.startswith("float32 (by its numbers; reported float16"), cell.computed_dtype
    assert "does not survive" in cell.reason
    torch_cell = one(r, backend="torch", precision="fp16")
    assert not any(f.kind == "computed-wider" for f in torch_cell.findings)


def test_computed_wider_fails_strict_alone():
    """A model that survives fp16: every cell passes, and only --strict fails the cell that computed wider."""
    r = fpdiff.check("example:tinycnn", backends=["torch", "widen"], precisions=["fp16"],
                     plugins=[str(PLUGINS / "widen.py")])
    assert [c.status for c in r.cells] == ["pass", "pass"], [c.reason for c in r.cells]
    assert [f.kind for f in one(r, backend="widen").findings] == ["computed-wider"]
    assert r.exit_code() == 0 and r.exit_code(strict=True) == 1
