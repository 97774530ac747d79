"""A segment IREE refuses deep inside a model: located at the refused op, with a repro that shows the refusal (its
bundle cannot be compiled: the script runs the compiler itself)."""
import subprocess
import sys

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
    # the bundle's compile fails the same way: the script runs iree-compile itself on the imported segment and
    # shows that failure (iree-base-compiler alone)
    assert r.repro is not None and (tmp_path / "b" / "segment.pt2").exists()
    p = subprocess.run([sys.executable, r.repro], capture_output=True, text=True, timeout=300)
    assert p.returncode not in (0, 3) and "iree-compile exited" in p.stdout + p.stderr, (p.stdout, p.stderr)
    assert r.findings[0].op == "aten.avg_pool2d.default"
