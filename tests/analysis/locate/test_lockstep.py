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
