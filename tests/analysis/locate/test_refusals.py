"""A segment IREE refuses deep inside a model: located at the refused op, and kept when the repro bundle cannot
be compiled (the refusal is why)."""
import pytest

import fpdiff
from conftest import SPECS
from fpdiff.core.status import Status

pytestmark = pytest.mark.slow  # real IREE compiles


def test_iree_refusal_is_named_at_its_op_and_survives_the_repro(tmp_path):
    r = fpdiff.locate(str(SPECS / "locate_refused_pool.py"), backend="iree", precision="fp32",
                      repro=str(tmp_path / "b"))
    seg = r.segment
    assert seg is not None and seg.status in (Status.ERROR, Status.UNSUPPORTED) and seg.stage == "compile"
    assert seg.first_op == "aten.avg_pool2d.default" and seg.module == "pool"
    assert seg.source.endswith("locate_refused_pool.py:19")
    c = r.as_dict()["culprit"]
    assert c["op"] == "aten.avg_pool2d.default" and c["component"] == "iree-compile"
    # the bundle compiles the segment again and fails the same way: a note, the segment kept for the report
    notes = [f for f in r.findings if f.kind == "note"]
    assert r.repro is None and notes and "repro bundle incomplete" in notes[0].message
    assert (tmp_path / "b" / "segment.pt2").exists()
    assert r.findings[0].op == "aten.avg_pool2d.default"
