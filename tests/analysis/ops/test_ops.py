"""The op sweep end to end on real backends: healthy backends stay quiet, a planted bug in one op under one
attribute is found exactly there with a repro that re-triggers, integer-valued ops are judged by flips."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fpdiff import api
from fpdiff.core.status import Status

PLANTED = str(Path(__file__).parents[2] / "plugins" / "planted.py")
FAILING = (Status.MISMATCH, Status.ERROR, Status.CRASH, Status.TIMEOUT)
pytestmark = pytest.mark.slow


def _cases(patterns, variants):
    from fpdiff.analysis.ops import catalog
    from fpdiff.analysis.ops import variants as v
    cases, _ = catalog.select(["torch", "onnx"], patterns, 2)
    names = v.select(variants)
    return v.expand(cases, names) + v.extra_cases(names, patterns, catalogs=["torch", "onnx"])


def _ceil(case) -> bool:
    """The planted plugin's condition, read off the case: average pooling with ceil_mode."""
    p = case.payload
    if case.catalog == "onnx":
        return any(n.op_type == "AveragePool" and any(a.name == "ceil_mode" and a.i for a in n.attribute)
                   for n in p.model.graph.node)
    return bool(p.kwargs.get("ceil_mode", p.args[4] if len(p.args) > 4 else False))


def _failing(result):
    return [c for c in result.cells if c.status in FAILING]


def test_healthy_backends_on_onnx_pooling_stay_quiet(tmp_path):
    r = api.ops(catalogs=["onnx"], patterns=["AveragePool"], variants=[], backends=["ort", "onnxref"],
                precisions=["fp32", "fp16"], samples=2, repro_dir=str(tmp_path / "repro"))
    assert r.cells, "no cell ran"
    assert not _failing(r), [(c.label, c.reason) for c in _failing(r)]
    d = r.as_dict()
    for key in ("op", "catalog", "variant", "backend", "precision", "status", "reason", "metrics", "support", "repro"):
        assert key in d["cells"][0]
    assert {c["op"] for c in d["cells"]} == {"AveragePool"}
    assert not r.judge_disagreements, r.judge_disagreements


def test_planted_bug_found_only_where_planted_with_a_retriggering_repro(tmp_path):
    r = api.ops(catalogs=["torch", "onnx"], patterns=["nn.functional.avg_pool2d", "AveragePool"],
                variants=["pool-ceil"], backends=["torch", "planted"], precisions=["fp32"], samples=2,
                plugins=[PLANTED], repro_dir=str(tmp_path / "repro"))
    bad = _failing(r)
    assert bad, "the planted bug was not found"
    assert all(c.backend == "planted" and c.status == Status.MISMATCH for c in bad), [c.label for c in bad]
    planted = {c.case_id for c in _cases(["nn.functional.avg_pool2d", "AveragePool"], ["pool-ceil"]) if _ceil(c)}
    assert {c.case for c in bad} == planted  # every planted cell found, and no other
    assert all(c.status == Status.PASS for c in r.cells if c.backend == "torch")
    assert all(c.repro and c.repro["retriggers"] is True for c in bad), [c.repro for c in bad]
    assert r.repro_check["retriggered"] == len(bad)
    assert r.reports and Path(r.reports[0]["path"]).read_text().startswith("#")
    script = bad[0].repro["path"]
    assert subprocess.run([sys.executable, script], capture_output=True).returncode == 1


def test_integer_valued_outputs_judged_by_flips():
    r = api.ops(catalogs=["torch"], patterns=["round", "floor"], variants=[], backends=["torch", "inductor"],
                precisions=["fp16", "bf16"], repro_dir=None)
    assert r.cells
    assert not _failing(r), [(c.label, c.reason) for c in _failing(r)]
    judged = [c for c in r.cells if c.status in (Status.PASS, Status.PRECISION_LOSS)]
    assert judged and all("flips" in c.reason for c in judged if c.metrics and c.metrics.get("discrete"))


def test_save_table_and_diff(tmp_path):
    r = api.ops(catalogs=["onnx"], patterns=["Relu"], variants=[], backends=["ort"], precisions=["fp16", "bf16"],
                repro_dir=None)
    path = tmp_path / "table.json"
    r.save_table(path)
    table = json.loads(path.read_text())
    assert table["kind"] == "ops-support" and table["rows"]
    assert {row["support"] for row in table["rows"]} <= {"native", "other-dtype", "not-implemented", None}


def test_a_local_ray_gives_the_same_cells_as_a_local_run():
    pytest.importorskip("ray", reason="Ray is the [ray] extra; the distribution tests need it")
    kw = dict(catalogs=["onnx"], patterns=["Relu", "Abs", "Round"], variants=[], backends=["ort", "onnxref"],
              precisions=["fp32", "fp16"], repro_dir=None, batch=2)
    here, there = api.ops(**kw), api.ops(ray="local", **kw)

    def cells(r):
        return [(c.case, c.backend, c.precision, c.status, (c.metrics or {}).get("rel_l2")) for c in r.cells]
    assert cells(here) and cells(here) == cells(there)


def test_ort_refusals_in_its_own_words_are_unsupported_and_scalars_stay_scalars():
    """LSTM/GRU with layout=1 ('are not supported') is ORT's refusal, not an error; Range's scalar inputs fed
    through ORT's own bfloat16 values keep their shape (a false shape mismatch before)."""
    r = api.ops(catalogs=["onnx"], patterns=["LSTM", "GRU", "Range"], variants=[], backends=["ort"],
                precisions=["fp32", "bf16"], samples=3, repro_dir=None)
    batchwise = [c for c in r.cells if "batchwise" in c.case]
    assert batchwise and all(c.status == Status.UNSUPPORTED and c.support == "not-implemented" for c in batchwise)
    ranges = [c for c in r.cells if c.op == "Range"]
    assert ranges and not any(c.status in FAILING for c in ranges), [(c.label, c.reason) for c in ranges]
