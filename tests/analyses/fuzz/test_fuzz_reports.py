"""A fuzz campaign's reports: the terminal's campaign line, discards by reason and findings; the JSON's keys the
issue names (graphs, discarded with why, findings with backend, precision, status, signature, ops, hits, repro);
the HTML page; the exit codes."""
import io
import json

from rich.console import Console

from fpdiff import analyses
from fpdiff.analysis.fuzz.campaign import Found, GraphRecord
from fpdiff.analysis.fuzz.oracle import DISCARDED, FAILING, ILL_CONDITIONED, PASS
from fpdiff.analysis.fuzz.result import LOST, UNRUN, FuzzResult
from fpdiff.report.json_report import cleaned

REASON = "rel L2 0.25 is 1.8e7x the baseline's [bold]not markup[/bold]"


def record(i, outcome, discard=None):
    return GraphRecord(i, 1000 + i, f"g{i:012d}", "torch", ["exp", "softmax"], "softmax(exp(x0)) [3x5]", outcome,
                       discard=discard, statuses={"ort/fp32": "pass"}, duration_s=0.5)


def found(sig="ort__fp16__mismatch__softmax__odd-size", **kw):
    base = dict(signature=sig, backend="ort", precision="fp16", status="mismatch", status_class="mismatch",
                ops=["softmax"], variant="odd-size", reason=REASON, metrics={"rel_l2": 0.25}, form="onnx",
                graph={"minimized": {"inputs": [], "nodes": [], "output": 0}, "id": "gabc", "original": "g1"},
                minimization={"ops_before": 5, "ops_after": 1, "probes": 14, "seconds": 20.5, "steps": [],
                              "matters": ["odd-size 3"]},
                hits=["g000000000001", "g000000000002"], matched=["g000000000003"],
                repro={"path": "fpdiff-out/fuzz/x/repro.py", "retriggers": True})
    base.update(kw)
    return Found(**base)


def campaign(findings=(), records=None):
    records = records if records is not None else [
        record(0, PASS), record(1, FAILING), record(2, DISCARDED, f"{ILL_CONDITIONED}"),
        record(3, DISCARDED, "float64 reference not finite"), record(4, UNRUN), record(5, LOST, "its batch timeout")]
    return FuzzResult(records=records, findings=list(findings), backends=["ort"], precisions=["fp32", "fp16"], seed=3,
                      duration_s=60.0)


def test_json_has_what_a_campaign_is_read_by():
    d = campaign([found()]).as_dict()
    assert d["kind"] == "fuzz" and d["graphs"] == 2 and d["generated"] == 4 and d["unrun"] == 1 and d["lost"] == 1
    assert d["discarded"]["count"] == 2
    assert d["discarded"]["by_reason"] == {"ill-conditioned": 1, "float64 reference not finite": 1}
    assert {g["reason"] for g in d["discarded"]["graphs"]} == {ILL_CONDITIONED, "float64 reference not finite"}
    f = d["findings"][0]
    for key in ("backend", "precision", "status", "signature", "ops", "hits", "repro"):
        assert key in f, key
    assert f["hit_count"] == 3 and "sample" not in f
    assert d["graphs_per_minute"] == 2.0
    assert d["next"] == ["python fpdiff-out/fuzz/x/repro.py"]
    json.dumps(cleaned(d))


def test_exit_codes():
    assert campaign([found()]).exit_code() == 1
    assert campaign().exit_code() == 0
    assert campaign(records=[record(0, DISCARDED, "x")]).exit_code() == 3  # nothing could be judged


def test_terminal_shows_the_campaign_discards_and_findings_without_markup_leaking():
    buf = io.StringIO()
    analyses.show(campaign([found()]), Console(file=buf, width=300, color_system=None))
    out = buf.getvalue()
    assert "2 graphs tested on ort x fp32, fp16" in out and "1 findings" in out
    assert "discarded 1: ill-conditioned" in out
    assert "ort/fp16" in out and "softmax" in out and "hits 3" in out and "5 -> 1 ops in 14 probes" in out
    assert "[bold]not markup[/bold]" in out  # the reason is shown as text, not as rich markup
    assert "re-triggers" in out


def test_html_page():
    page = analyses.html_page(cleaned(campaign([found()]).as_dict()))
    assert "Findings" in page and "softmax" in page and "odd-size" in page and "Discarded graphs" in page
    assert "&lt;" not in REASON and "[bold]not markup[/bold]" in page
    empty = analyses.html_page(cleaned(campaign().as_dict()))
    assert "None." in empty
