"""The float64 promotion: every float op in float64 whatever the model asks, the model's casts recorded with file:line,
integer and bool casts untouched, fpdiff's own float64 grouped matmul, and the judge/cell split in the torch backend."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fpdiff.core.errors import Unsupported
from fpdiff.model.float64 import DECOMPOSITION, MODEL_CAST, float64_everywhere, run_float64
from fpdiff.sources.spec import build, import_spec

SPECS = Path(__file__).parents[1] / "specs"
HERE = Path(__file__).name


def _line(fn, marker: str) -> int:
    """The line of this file holding `marker` inside `fn`'s source."""
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if marker in s)


def casting(x):
    a = x.float()  # cast-a
    b = x.to(torch.float16)  # cast-b
    c = x.sum(dtype=torch.float32)  # cast-c
    d = torch.arange(3).float()  # cast-d
    e = torch.zeros(2)
    f = torch.softmax(x, -1, dtype=torch.bfloat16)  # cast-f
    g = x.type_as(torch.ones(1, dtype=torch.float32))  # cast-g
    return a, b, c, d, e, f, g, x.long(), x > 0, x.to(torch.int32)


def test_every_float_cast_is_computed_in_float64_and_recorded_with_its_line():
    out, findings = run_float64(casting, torch.randn(5, dtype=torch.float64))
    assert [t.dtype for t in out[:7]] == [torch.float64] * 7
    kinds = {f.kind for f in findings}
    assert kinds == {MODEL_CAST}
    text = " ".join(f.message for f in findings)
    for marker, dtype in [("cast-a", "float32"), ("cast-b", "float16"), ("cast-c", "float32"), ("cast-d", "float32"),
                          ("cast-f", "bfloat16")]:
        assert f"{HERE}:{_line(casting, marker)}" in text and dtype in text, marker
    assert torch.get_default_dtype() == torch.float32  # restored after the promotion


def test_integer_and_bool_casts_stay_as_asked():
    out, findings = run_float64(casting, torch.randn(5, dtype=torch.float64))
    assert [t.dtype for t in out[7:]] == [torch.int64, torch.bool, torch.int32]
    assert not any("int" in f.message.split(" at ")[0] for f in findings)


def test_recording_alone_changes_nothing():
    out, findings = run_float64(casting, torch.randn(5, dtype=torch.float64), promote=False)
    assert [t.dtype for t in out[:4]] == [torch.float32, torch.float16, torch.float32, torch.float32]
    assert out[4].dtype == torch.float32  # the default dtype is left alone
    assert {f.kind for f in findings} == {MODEL_CAST}


def test_an_explicit_cast_that_destroys_the_answer_is_not_followed_by_the_judge():
    path = SPECS / "cast_cancellation.py"
    mod = import_spec(path)
    m, (x,) = build(mod, path, 0)
    m = m.double()
    want = m.small.detach().expand(4, -1)
    with torch.no_grad():
        as_written = m(x.double())
    judged, findings = run_float64(m, x)
    assert ((as_written - want).norm() / want.norm()).item() > 0.5  # float32 leaves nothing of the small term
    assert ((judged - want).norm() / want.norm()).item() < 1e-7  # float64: s to about 1e-8
    casts = [f for f in findings if f.kind == MODEL_CAST]
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if "the cast the judge" in s)
    assert any(f"cast_cancellation.py:{line}" in f.message and "float32" in f.message for f in casts)


def _groups(a, b, ends):
    starts = [0] + ends[:-1]
    if a.dim() == 2 and b.dim() == 3:
        return torch.cat([a[s:e] @ b[g] for g, (s, e) in enumerate(zip(starts, ends))])
    if a.dim() == 3:
        return torch.cat([a[g] @ b[:, s:e] for g, (s, e) in enumerate(zip(starts, ends))], 1)
    return torch.stack([a[:, s:e] @ b[s:e] for s, e in zip(starts, ends)])


@pytest.mark.parametrize("shapes,ends", [(((6, 8), (2, 8, 8)), [2, 6]), (((2, 4, 8), (8, 16)), [8, 16]),
                                         (((8, 16), (16, 8)), [8, 16])])
def test_grouped_mm_has_a_float64_decomposition(shapes, ends):
    a, b = (torch.randn(s, dtype=torch.float64) for s in shapes)
    offs = torch.tensor(ends, dtype=torch.int32)
    with pytest.raises(RuntimeError):
        torch._grouped_mm(a, b, offs=offs)  # torch's kernel refuses float64: the reason for the decomposition
    out, findings = run_float64(lambda a, b: torch._grouped_mm(a, b, offs=offs), a, b)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, _groups(a, b, ends), rtol=0, atol=0)
    ours = torch._grouped_mm(a.float(), b.float(), offs=offs).double()  # torch's own kernel, in float32
    assert ((out - ours).norm() / out.norm()).item() < 1e-6
    assert [f.kind for f in findings] == [DECOMPOSITION] and "aten::_grouped_mm" in findings[0].message


def test_grouped_mm_run_as_written_is_torchs_declared_refusal():
    a, b = torch.randn(6, 8, dtype=torch.float64), torch.randn(2, 8, 8, dtype=torch.float64)
    offs = torch.tensor([2, 6], dtype=torch.int32)
    with float64_everywhere(promote=False), pytest.raises(Unsupported) as e:
        torch._grouped_mm(a, b, offs=offs)
    assert e.value.op == "aten::_grouped_mm" and e.value.dtype == "float64"


@pytest.mark.slow
def test_the_judge_is_true_float64_the_fp64_cell_runs_the_model_and_low_precisions_are_untouched():
    import fpdiff
    path = SPECS / "cast_cancellation.py"
    r = fpdiff.check(str(path), backends=["torch"], precisions=["fp64", "fp16"])
    line = next(i for i, s in enumerate(path.read_text().splitlines(), 1) if "the cast the judge" in s)
    casts = [f for f in r.reference["findings"] if f["kind"] == MODEL_CAST]
    assert any(f"cast_cancellation.py:{line}" in f["message"] and "float32" in f["message"] for f in casts)
    cells = {c.precision: c for c in r.cells}
    # the cell runs the model's float32 cast: nothing of the small term is left, against the true float64 judge
    assert cells["fp64"].metrics["rel_l2"] > 0.5 and cells["fp64"].status == "precision-loss"
    assert cells["fp64"].computed_dtype == "float64 with the model's own casts to float32"
    assert any(f.kind == MODEL_CAST for f in cells["fp64"].findings)
    assert cells["fp16"].output_dtypes == ["float16"] and cells["fp16"].computed_dtype == "float16"
    assert not any(f.kind == MODEL_CAST for f in cells["fp16"].findings)


@pytest.mark.slow
def test_a_kernel_without_float64_is_decomposed_in_the_judge_and_refused_in_the_cell():
    import fpdiff
    r = fpdiff.check(str(SPECS / "cast_grouped_experts.py"), backends=["torch"], precisions=["fp64", "fp32"])
    assert [f["kind"] for f in r.reference["findings"]] == [DECOMPOSITION]
    cells = {c.precision: c for c in r.cells}
    assert cells["fp64"].status == "unsupported" and "aten::_grouped_mm" in cells["fp64"].reason
    assert cells["fp32"].status == "pass", cells["fp32"].reason
