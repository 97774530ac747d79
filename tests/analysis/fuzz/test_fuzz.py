"""Fuzz campaigns end to end on real backends: a planted bug in one op under one shape variant is found within a
bounded number of graphs and minimized to a few ops with a repro that re-triggers; a healthy backend yields no
finding; a local Ray gives the same findings for the same seed."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fpdiff import api

PLANTED = str(Path(__file__).parents[2] / "plugins" / "planted_fuzz.py")
pytestmark = pytest.mark.slow
# ops the planted campaign draws from: softmax (the planted op) among ops that feed and follow it, so the bug must
# be told from what surrounds it; 16 graphs of seed 6 hold four softmaxes over an odd dim (one masked by what
# follows it) among others over even dims
PLANTED_OPS = ["softmax", "add", "mul", "exp", "tanh", "transpose", "sum", "relu"]
# "softmax" selects every vocabulary op that computes one (by name or catalog name): softmax, its fp32 cast region,
# and unfused attention, each of which runs aten's softmax, where the bug is planted
SOFTMAXES = ("softmax", "softmax_fp32", "attention")
PLANTED_KW = dict(backends=["planted-fuzz"], precisions=["fp32"], graphs=16, seed=6, ops=PLANTED_OPS,
                  plugins=[PLANTED], max_ops=5)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return api.fuzz(repro_dir=str(tmp_path_factory.mktemp("repro")), **PLANTED_KW)


def test_the_planted_bug_is_found_minimized_and_reproduced(planted):
    d = planted.as_dict()
    assert d["graphs"] >= 8, d["discarded"]
    assert planted.findings, "the planted softmax bug was not found"
    for f in planted.findings:  # nothing but the planted bug on this backend
        assert f.backend == "planted-fuzz" and f.status == "mismatch", f.as_dict()
        assert any(op in SOFTMAXES for op in f.ops) and len(f.ops) <= 3, f.ops
        assert f.repro and f.repro.get("path") and f.repro.get("retriggers") is True, f.repro
    lead = planted.findings[0]
    small = lead.graph["minimized"]
    soft = [n for n in small["nodes"] if n["op"] in SOFTMAXES]
    assert soft, small
    # the minimized graph keeps what the bug needs: a softmax over an odd dim
    out = subprocess.run([sys.executable, lead.repro["path"]], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert d["findings"][0]["hit_count"] >= 1
    for key in ("backend", "precision", "status", "signature", "ops", "hits", "repro"):
        assert key in d["findings"][0]
    json.dumps(d)


def test_the_same_findings_on_a_local_ray(planted, tmp_path):
    pytest.importorskip("ray", reason="Ray is the [ray] extra; the distribution tests need it")
    there = api.fuzz(ray="local", repro_dir=str(tmp_path / "repro"), **PLANTED_KW)
    key = [(f.signature, len(f.hits) + len(f.matched)) for f in planted.findings]
    assert [(f.signature, len(f.hits) + len(f.matched)) for f in there.findings] == key
    assert [r.id for r in there.records] == [r.id for r in planted.records]


def test_a_healthy_backend_yields_no_finding(tmp_path):
    r = api.fuzz(backends=["ort"], precisions=["fp32", "fp16"], graphs=24, seed=7, repro_dir=str(tmp_path))
    d = r.as_dict()
    assert d["graphs"] >= 12, d["discarded"]
    assert not r.findings, [f.as_dict() for f in r.findings]
    assert {rec.form for rec in r.tested()} == {"torch", "onnx"}


SCATTER = str(Path(__file__).parents[2] / "plugins" / "planted_scatter.py")
# SEEDS.md #2's class of bug, planted: scatter wrong only where its data mixes static and dynamic dims. The fuzzer
# gets the op family alone; 13 graphs of seed 0 hold four that fail, one of them dynamic in every dim
SCATTER_KW = dict(backends=["planted-scatter"], precisions=["fp32"], graphs=13, seed=0, ops=["scatter*"],
                  forms=["torch"], plugins=[SCATTER])


def test_a_scatter_wrong_only_in_mixed_dims_is_found_with_its_signature(tmp_path):
    r = api.fuzz(repro_dir=str(tmp_path), **SCATTER_KW)
    assert r.findings, "the planted mixed-dims scatter bug was not found"
    for f in r.findings:  # nothing but the planted bug on this backend
        assert f.backend == "planted-scatter" and f.status == "mismatch", f.as_dict()
        assert set(f.ops) <= {"scatter", "scatter_add", "index_put"} and len(f.ops) <= 2, f.ops
        assert f.shapes.get("static") == "pass", f.shapes  # all static: right
        assert f.repro and f.repro.get("retriggers") is True, f.repro
    # right at both ends, wrong in a mix: the signature SEEDS.md #2 reported
    mixed = [f for f in r.findings if "mixed-dims" in f.variant]
    assert mixed, [(f.variant, f.shapes) for f in r.findings]
    shapes = mixed[0].shapes
    assert shapes["dynamic"] == "pass" and any(v.startswith("mixed:") and s == "mismatch" for v, s in shapes.items())
    # every graph that failed failed only where dims are dynamic: its static cell passed
    for rec in r.tested():
        assert rec.statuses.get("planted-scatter/fp32") == "pass", rec.statuses


def test_a_cut_campaign_resumes_where_it_stopped(tmp_path):
    kw = dict(backends=["torch"], precisions=["fp32"], ops=["add", "exp", "gather"], forms=["torch"], seed=3,
              repro_dir=None)
    first = api.fuzz(graphs=2, **kw)
    report = tmp_path / "run.json"
    report.write_text(json.dumps(first.as_dict()))
    more = api.fuzz(graphs=4, resume=str(report), **kw)
    straight = api.fuzz(graphs=4, **kw)
    assert more.resumed == len(first.records) == 2
    assert [x.id for x in more.records] == [x.id for x in straight.records]
    assert [x.id for x in more.records[:2]] == [x.id for x in first.records]
    from fpdiff.core.errors import UsageError
    with pytest.raises(UsageError, match="other settings: seed 3"):
        api.fuzz(graphs=4, resume=str(report), **{**kw, "seed": 4})
    report.write_text("{}")
    with pytest.raises(UsageError, match="not a fuzz report"):
        api.fuzz(graphs=4, resume=str(report), **kw)
