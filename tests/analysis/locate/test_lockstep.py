"""locate on torch eager: the op that departs, told from the ops that only inherit error."""
import pytest

import fpdiff
from conftest import SPECS
from fpdiff.core.errors import UsageError

pytestmark = pytest.mark.slow  # real backends: make test, not make test-fast


def test_overflow_inside_rmsnorm_is_blamed_on_the_square():
    r = fpdiff.locate("example:rmsnorm", precision="fp16")
    c = r.culprit
    assert c is not None and c.op == "aten.mul.Tensor" and c.cause == "overflow"
    assert c.source.endswith("rmsnorm.py:15")
    assert r.output_error > 0.5
    a = r.as_dict()["culprit"]
    assert (a["op"], a["node"], a["found_by"], a["cause"]) == ("aten.mul.Tensor", c.node, "torch eager lockstep",
                                                             "overflow")
    assert a["source"].endswith("rmsnorm.py:15") and a["evidence"]["ratio"] == "inf"


def test_underflow_is_blamed_on_the_op_that_flushes_not_where_inf_shows_up():
    r = fpdiff.locate(str(SPECS / "demod_underflow.py"), precision="fp16")
    c = r.culprit
    assert c.op == "aten.mul.Tensor" and c.cause == "underflow" and c.index == 0
    later = [o for o in r.ops if o.index > c.index and o.accumulated == float("inf")]
    assert later and all(o.cause == "inherits" for o in later)  # rsqrt's inf is inherited, not made


@pytest.mark.parametrize("example", ["tinycnn", "tinyformer", "rmsnorm", "router"])
def test_plain_fp32_claims_no_culprit(example):
    r = fpdiff.locate(f"example:{example}", precision="fp32")
    assert r.culprit is None, (r.culprit and r.culprit.as_dict())


def test_healthy_fp16_and_bf16_claim_no_culprit():
    for p in ("fp16", "bf16"):
        assert fpdiff.locate("example:tinyformer", precision=p).culprit is None


def test_unknown_backend_and_onnx_models_are_refused_clearly(tmp_path):
    with pytest.raises(UsageError, match="unknown backend"):
        fpdiff.locate("example:tinycnn", backend="tensorrt")
    bad = tmp_path / "m.onnx"
    bad.write_bytes(b"")
    with pytest.raises(UsageError):
        fpdiff.locate(str(bad))


def test_progress_tells_the_export_and_every_op_of_the_streamed_pass():
    told = []
    r = fpdiff.locate("example:tinyformer", precision="fp16", progress=lambda *a: told.append(a))
    assert told[:2] == [("export", 0, 1), ("export", 1, 1)]
    ops = [t for t in told if t[0] == "ops"]
    total = ops[-1][2]
    assert [t[1] for t in ops] == list(range(1, total + 1)) and {t[2] for t in ops} == {total}
    assert total >= len(r.ops)  # every op is told, including those that make no floats (getitem, shape ops)


def test_the_callers_model_is_left_as_it_was_and_the_numbers_do_not_depend_on_it():
    """The float64 run reads the caller's weights cast as each op needs them: the model keeps its dtype and
    values, and a second analysis of the same model gives the same numbers bit for bit."""
    import torch

    from fpdiff.analysis.locate import analyse
    from fpdiff.core import precision as prec
    from fpdiff.sources import load
    src = load(str(SPECS / "demod_underflow.py"))
    before = {k: v.clone() for k, v in src.module.state_dict().items()}
    first = analyse(src.module, src.inputs, prec.get("fp16"), own=True)
    after = src.module.state_dict()
    assert all(after[k].dtype == v.dtype and torch.equal(after[k], v) for k, v in before.items())
    second = analyse(src.module, src.inputs, prec.get("fp16"), own=True)
    assert [o.as_dict() for o in first[0]] == [o.as_dict() for o in second[0]] and first[1] == second[1]
