"""The op sweep's reports: the matrix and failing cells in the terminal, the JSON cell keys, the HTML page, JUnit,
the exit codes, the saved support table and its diff, and two stored sweeps diffed cell by cell."""
import io
import json
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from fpdiff import analyses
from fpdiff.analyses.ops import ops_cells
from fpdiff.analysis.ops.case import NATIVE, NOT_IMPLEMENTED, OTHER_DTYPE, OpsCell
from fpdiff.analysis.ops.result import OpsResult
from fpdiff.core.compare import Finding
from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status
from fpdiff.report import store
from fpdiff.report.json_report import cleaned

POOL_REASON = "rel L2 0.31 is 900x the baseline's [bold]not markup[/bold]"


def cell(op="nn.functional.avg_pool2d", backend="ort", precision="fp16", status=Status.PASS, **kw) -> OpsCell:
    catalog = kw.pop("catalog", "torch")
    case = kw.pop("case", f"{op}#0")
    family = kw.pop("family", "pool" if "pool" in op.lower() else op.split(".")[-1])
    return OpsCell(backend, "cpu", precision, kw.pop("shape_variant", "static"), status, op=op, catalog=catalog,
                   variant=kw.pop("variant", "sample"), case=case, family=family, **kw)


def sweep(ort_pool=Status.MISMATCH, iree_support=NOT_IMPLEMENTED, extra=()) -> OpsResult:
    cells = [
        cell(status=ort_pool, reason=POOL_REASON, metrics={"rel_l2": 0.31, "max_norm": 0.5}, support=NATIVE,
             repro={"path": "fpdiff-out/ops/avg_pool2d-ort-fp16", "retriggers": True, "report": "bug-1.md"}),
        cell(backend="torch", status=Status.PASS, metrics={"rel_l2": 3e-4}, support=NATIVE),
        cell(backend="iree", precision="bf16", status=Status.UNSUPPORTED, reason="no bf16 kernel",
             support=iree_support, support_detail="compile refused bf16"),
        cell(op="abs", backend="ort", precision="fp32", status=Status.PASS, support=NATIVE),
        cell(op="abs", backend="ort", precision="fp32", status=Status.PRECISION_LOSS, support=OTHER_DTYPE,
             case="abs#1", support_detail="ran in fp16", findings=[Finding("dtype-changed", "asked fp32, ran fp16")]),
        cell(op="AveragePool", catalog="onnx", case="test_averagepool_2d_pads", backend="openvino", status=Status.CRASH,
             reason="worker died (SIGSEGV)", repro={"path": "fpdiff-out/ops/ap-ov/repro.py", "retriggers": False}),
        *extra]
    return OpsResult(cells=cells, skipped=[{"catalog": "torch", "op": "svd", "reason": "no CPU sample"}] * 3
                     + [{"catalog": "onnx", "op": "Loop", "reason": "a subgraph op"}], unrun=7,
                     versions={"torch": "2.13.0", "onnxruntime": "1.22.0"}, duration_s=12.0,
                     judge_disagreements=[{"case": "test_dft", "op": "DFT", "rel_l2": 0.2, "detail": "axis read"}],
                     repro_check={"written": 20, "retriggered": 19, "broken": 0},
                     reports=[{"signature": "ort avg_pool2d fp16", "cells": 1, "path": "bug-1.md"}],
                     model="ops: torch,onnx")


def shown(result, **view) -> str:
    console = Console(record=True, width=200, file=io.StringIO(), color_system=None)
    analyses.show(result, console, **view)
    return console.export_text()


def test_the_terminal_shows_the_matrix_then_each_failing_cell_with_its_repro():
    text = shown(sweep())
    assert "pool" in text and "1M" in text and "1U" in text and "1L" in text  # the matrix, a letter per status
    assert ("mismatch  nn.functional.avg_pool2d#0  ort/fp16/static  sample: " + POOL_REASON) in text  # not markup
    assert "repro fpdiff-out/ops/avg_pool2d-ort-fp16 (re-triggers)" in text
    assert "crash  test_averagepool_2d_pads  openvino/fp16/static" in text and "does not re-trigger" in text
    assert "skipped 4 catalog entries: 3 no CPU sample; 1 a subgraph op" in text
    assert "7 cases not started" in text and "judge vs catalog test_dft (DFT): rel L2 2.0e-01" in text
    assert "repros re-trigger 19 of 20 (95%)" in text
    assert text.count("next: python fpdiff-out/ops/avg_pool2d-ort-fp16/repro.py") == 1
    assert "next: python fpdiff-out/ops/ap-ov/repro.py" in text
    assert text.index("mismatch  nn") < text.index("crash  test_")  # mismatches first


def test_next_names_one_repro_per_distinct_bug():
    same_bug = cell(case="nn.functional.avg_pool2d#1", status=Status.MISMATCH, reason="r",
                    repro={"path": "fpdiff-out/ops/b/repro.py", "retriggers": True})
    other_bug = cell(backend="iree", status=Status.MISMATCH, reason="r", repro={"path": "fpdiff-out/ops/c/repro.py"})
    steps = sweep(extra=[same_bug, other_bug]).next_steps()
    assert len(steps) == 3 and sum("avg_pool2d-ort" in s or "/b/" in s for s in steps) == 1
    assert "python fpdiff-out/ops/c/repro.py" in steps and steps[-1] == "python fpdiff-out/ops/ap-ov/repro.py"


def test_thousands_of_cells_stay_readable():
    many = [cell(op=f"op{i}", family=f"fam{i}", status=Status.PASS if i % 3 else Status.UNSUPPORTED)
            for i in range(600)]
    many += [cell(op=f"bad{i}", family="bad", status=Status.MISMATCH, reason="r") for i in range(100)]
    text = shown(OpsResult(cells=many, model="ops: torch"), top=10)
    assert "+600 more" in text and "200U 400P" in text and "100M" in text
    assert "... and 90 more failing cells, see --json" in text and len(text.splitlines()) < 40
    assert "fam17" in shown(OpsResult(cells=many), show_all=True)


def test_the_json_has_one_object_per_cell_with_the_keys_the_issue_names():
    d = cleaned(sweep().as_dict())
    assert d["kind"] == "ops" and len(d["cells"]) == 6
    keys = {"op", "catalog", "variant", "backend", "precision", "status", "reason", "metrics", "support", "repro"}
    assert all(keys <= set(c) for c in d["cells"])
    assert d["summary"]["mismatch"] == 1 and d["summary"]["crash"] == 1 and d["by_backend"]["ort"]["pass"] == 1
    assert d["matrix"]["pool"]["iree"]["bf16"] == {"unsupported": 1} and d["unrun"] == 7
    assert d["repro_check"]["retriggered"] == 19 and d["reports"][0]["path"] == "bug-1.md"
    json.dumps(d)  # plain values only


def test_the_support_table_takes_the_most_telling_state_per_op_backend_and_precision():
    rows = {(r["op"], r["backend"], r["precision"]): r for r in sweep().support_table()}
    assert rows[("abs", "ort", "fp32")]["support"] == OTHER_DTYPE  # one of its two cases ran in another dtype
    assert rows[("abs", "ort", "fp32")]["detail"] == "ran in fp16"
    assert rows[("nn.functional.avg_pool2d", "iree", "bf16")]["support"] == NOT_IMPLEMENTED
    assert rows[("AveragePool", "openvino", "fp16")]["support"] is None and len(rows) == 5


def test_exit_codes_fail_on_failing_cells_and_strict_on_precision_loss_not_on_refusals():
    assert sweep().exit_code() == 1
    clean = sweep(ort_pool=Status.PASS)
    clean.cells = [c for c in clean.cells if c.status != Status.CRASH]
    assert clean.exit_code() == 0 and clean.exit_code(strict=True) == 1  # the precision-loss cell
    clean.cells = [c for c in clean.cells if c.status != Status.PRECISION_LOSS]
    assert clean.exit_code(strict=True) == 0  # an unsupported cell is a support fact, not a strict failure
    clean.cells[0].findings = [Finding("coarser-than-requested", "computed in bf16")]
    assert clean.exit_code() == 0 and clean.exit_code(strict=True) == 1


def test_html_renders_the_matrix_and_failing_cells_escaped():
    text = analyses.html_page(cleaned(sweep().as_dict()))
    assert "<script" not in text and "<h2>Matrix</h2>" in text and "<h2>Failing cells</h2>" in text
    assert "[bold]not markup[/bold]" in text and "worker died (SIGSEGV)" in text and "test_dft" in text
    assert "Repros re-trigger 19 of 20 (95%)" in text and "1 mismatch" in text and "2.13.0" in text
    assert "<td>abs#1</td>" not in text  # a precision-loss cell is in the matrix, not among the failing


def test_junit_has_a_testcase_per_cell_failing_as_the_exit_code():
    suite = analyses.junit_suite(sweep()).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert suite.get("tests") == "6" and suite.get("failures") == "2" and suite.get("skipped") == "1"
    pool = cases["nn.functional.avg_pool2d#0 ort fp16 static"]
    assert pool.get("classname") == "ops.torch.nn.functional.avg_pool2d"
    assert pool.find("failure").get("type") == "mismatch" and "repro: fpdiff-out" in pool.find("failure").text
    assert cases["nn.functional.avg_pool2d#0 iree bf16 static"].find("skipped") is not None
    assert analyses.junit_suite(sweep(), strict=True).getroot().get("failures") == "3"
    ET.tostring(suite)


def test_a_saved_support_table_diffs_gained_lost_added_and_removed(tmp_path):
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    old = sweep(extra=[cell(op="gone", backend="ort", status=Status.PASS, support=NATIVE)])
    old.save_table(before)
    new = sweep(iree_support=NATIVE, extra=[cell(op="fresh", backend="ort", status=Status.PASS, support=NATIVE)])
    new.cells[3].support = NOT_IMPLEMENTED  # abs on ort fp32: both its cells now say no kernel
    new.cells[4].support = NOT_IMPLEMENTED
    new.versions = {**new.versions, "onnxruntime": "1.23.0"}
    new.save_table(after)
    assert json.loads(before.read_text())["kind"] == "ops-support"
    d = store.diff_tables(before, after)
    by_row = {c["row"]: c for c in d["changed"]}
    gained = by_row["torch/nn.functional.avg_pool2d/iree/bf16"]
    assert (gained["kind"], gained["before"], gained["after"]) == ("gained", NOT_IMPLEMENTED, NATIVE)
    assert by_row["torch/abs/ort/fp32"]["kind"] == "lost" and d["regressions"] == 1
    assert by_row["torch/gone/ort/fp16"]["kind"] == "removed" and by_row["torch/fresh/ort/fp16"]["kind"] == "added"
    assert d["versions"] == {"onnxruntime": ("1.22.0", "1.23.0")} and len(d["changed"]) == 4
    lines = "\n".join(store.table_diff_lines(d))
    assert "gained   torch/nn.functional.avg_pool2d/iree/bf16: not-implemented -> native" in lines
    assert "onnxruntime: 1.22.0 -> 1.23.0" in lines
    assert store.diff_tables(before, before)["changed"] == []
    report = tmp_path / "run.json"  # an ops --json report carries its table too
    report.write_text(json.dumps(cleaned(new.as_dict())))
    assert store.diff_tables(report, after)["changed"] == []


@pytest.mark.parametrize("content, words", [("{oops", "is not JSON"), ('{"kind": "check", "cells": []}',
                                                                        "is not a support table")])
def test_a_file_that_is_not_a_support_table_is_one_line(tmp_path, content, words):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(UsageError, match=words):
        store.diff_tables(bad, bad)
    with pytest.raises(UsageError, match="cannot read"):
        store.diff_tables(tmp_path / "missing.json", bad)
    with pytest.raises(UsageError, match="cannot write the support table"):
        sweep().save_table("/proc/no/table.json")


def test_two_stored_sweeps_diff_cell_by_cell(tmp_path):
    db = tmp_path / "h.sqlite"
    a = store.save_result(sweep(), db, {}, 1, ops_cells)
    fixed = sweep(ort_pool=Status.PASS)
    b = store.save_result(fixed, db, {}, 1, ops_cells)
    broke = sweep()
    broke.cells[1].status = Status.MISMATCH  # torch's avg_pool2d cell
    c = store.save_result(broke, db, {}, 1, ops_cells)
    assert store.diff(db, a, a, ["ops"])["changed"] == []
    better = store.diff(db, a, b, ["ops"])
    assert [(x["cell"], x["kind"]) for x in better["changed"]] == [
        ("ort/nn.functional.avg_pool2d#0/fp16/static", "improvement")]
    worse = store.diff(db, a, c, ["ops"])
    assert worse["regressions"] == 1 and worse["changed"][0]["cell"] == "torch/nn.functional.avg_pool2d#0/fp16/static"
    assert store.runs(db)[0]["kind"] == "ops" and store.runs(db)[0]["cells"]["mismatch"] == 1
