"""fpdiff publish: a real tiny sweep's support table and report made into the searchable page and SUPPORT.md; every
row and version on the page, names escaped, nothing fetched; the Markdown's counts those of the table; two tables
of one sweep at two versions say what the newer gained and lost; bad input is one line and exit 2."""
import json
import re
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import headless
import pytest

import fpdiff
from fpdiff.core.errors import UsageError
from fpdiff.report import store
from fpdiff.report.json_report import dump
from fpdiff.report.support_page import publish

EVIL = "<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two torch ops on torch and ONNX Runtime at fp32: the saved table, the JSON report, the result."""
    where = tmp_path_factory.mktemp("sweep")
    with pytest.MonkeyPatch.context() as m:
        m.chdir(where)
        r = fpdiff.ops(catalogs=["torch"], patterns=["abs", "sigmoid"], variants=[], backends=["torch", "ort"],
                       precisions=["fp32"], repro_dir=None)
    assert r.cells, "the sweep ran nothing"
    r.save_table(where / "table.json")
    dump(r.as_dict(), where / "report.json")
    return where / "table.json", where / "report.json", r


class Rows(HTMLParser):
    """The page's op rows (their data-* attributes and each cell's text: backend and its version, precision,
    catalog, op, ...), the search box and every src/href."""

    def __init__(self):
        super().__init__()
        self.rows, self.links, self.search, self._row = [], [], False, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.links += [a[k] for k in ("src", "href") if k in a]
        self.search |= tag == "input" and a.get("type") == "search"
        if tag == "tr" and "data-text" in a:
            self._row = {**a, "cells": []}
            self.rows.append(self._row)
        if tag == "td" and self._row is not None:
            self._row["cells"].append("")

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        if self._row is not None and self._row["cells"]:
            self._row["cells"][-1] += data


def parsed(path: Path) -> Rows:
    p = Rows()
    p.feed(path.read_text())
    return p


def md_matrix(text: str, section: str) -> dict[tuple[str, str], dict[str, int]]:
    """The count matrix of one table's section of SUPPORT.md: (backend, precision) -> column -> count."""
    part = text.split(f"## {section} ")[1].split("\n## ")[0]
    lines = [ln for ln in part.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    out = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        out[(cells[0], cells[1])] = {h: int(v) for h, v in zip(head[2:], cells[2:])}
    return out


def edited(src: Path, dst: Path, edit) -> Path:
    data = json.loads(src.read_text())
    edit(data)
    dst.write_text(json.dumps(data))
    return dst


def test_the_page_lists_every_row_with_its_backend_version_error_and_a_search(sweep, tmp_path):
    _, report, r = sweep
    written = publish([report], tmp_path / "site")
    assert set(written) == {"html", "markdown", "data"} and all(p.is_file() for p in written.values())
    page = parsed(written["html"])
    assert page.search, "no search box"
    got = {(row["data-backend"], row["data-precision"], row["data-status"], row["data-support"]) + (row["cells"][3],)
           for row in page.rows}
    want = {(c.backend, c.precision, str(c.status), c.support, c.op) for c in r.cells}
    assert got == want
    text = written["html"].read_text()
    assert f"onnxruntime {r.versions['onnxruntime']}" in text and f"torch {r.versions['torch']}" in text
    rel = [c.metrics["rel_l2"] for c in r.cells if c.metrics]
    assert rel and all(f"{x:.1e}" in text for x in rel)  # each row's error against float64
    assert "1.0e-05" in text  # fp32's tolerance, the one the cells were judged by
    assert not [u for u in page.links if re.match(r"\s*(https?:)?//", u)], page.links
    assert "http://" not in text and "https://" not in text  # nothing fetched: no CDN, no font, no script


def test_names_are_escaped_on_the_page_and_in_the_markdown(sweep, tmp_path):
    table, _, _ = sweep
    evil = edited(table, tmp_path / "evil.json", lambda d: d["rows"].append(
        {"catalog": "torch", "op": EVIL, "backend": "ort", "precision": "fp32", "support": "native",
         "detail": "</td><script>alert(2)</script>"}))
    written = publish([evil], tmp_path / "site", title="<b>title</b>")
    text = written["html"].read_text()
    assert EVIL not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "<script>alert" not in text and "<b>title" not in text
    assert any(row["cells"][3] == EVIL for row in parsed(written["html"]).rows)  # the name read back as it was
    md = written["markdown"].read_text()
    assert "<b>title" not in md and "<img" not in md.replace(f"`{EVIL}`", "")


def test_the_markdown_matrix_counts_the_tables_cells(sweep, tmp_path):
    table, report, r = sweep
    md = publish([table, report], tmp_path / "site")["markdown"].read_text()
    assert f"onnxruntime {r.versions['onnxruntime']}" in md
    rows = store.load_table(table)["rows"]
    want = Counter((x["backend"], x["precision"], x["support"]) for x in rows)
    got = md_matrix(md, "table")
    assert {(b, p, s): n for (b, p), cols in got.items() for s, n in cols.items() if s in ("native", "other-dtype",
            "not-implemented") and n} == dict(want)
    assert all(cols["status not recorded"] == sum(n for (b2, p2, _), n in want.items() if (b2, p2) == (b, p))
               for (b, p), cols in got.items())
    keys = Counter((c.catalog, c.op, c.variant, c.backend, c.precision) for c in r.cells)
    assert set(keys.values()) == {1}  # one cell per row in this sweep: the row's status is its cell's
    want = Counter((c.backend, c.precision, str(c.status)) for c in r.cells)
    got = md_matrix(md, "report")
    assert {(b, p, s): n for (b, p), cols in got.items() for s, n in cols.items() if s in {k[2] for k in want}
            and n} == dict(want)


def test_an_upgrade_says_what_the_newer_gained_and_lost(sweep, tmp_path):
    table, _, _ = sweep

    def upgrade(d):
        d["versions"]["onnxruntime"] = "99.0.0"
        for row in d["rows"]:
            if row["backend"] == "ort" and row["op"] == "abs":
                row["support"] = "not-implemented"

    newer = edited(table, tmp_path / "newer.json", upgrade)
    written = publish([table, newer], tmp_path / "site")
    md = written["markdown"].read_text()
    assert "## Upgrade: table -> newer" in md and "1 lost" in md
    for line in store.table_diff_lines(store.diff_tables(table, newer))[1:]:
        assert line in md
    text = written["html"].read_text()
    assert "Upgrade: table &rarr; newer" in text and "99.0.0" in text and ">lost<" in text
    assert "onnxruntime 99.0.0" in text  # the newer table's rows name the newer version
    same = publish([table, table], tmp_path / "same")["markdown"].read_text()
    assert "Upgrade" not in same  # the same versions: two views of one stack, not an upgrade


def test_publish_refuses_bad_input_in_one_line(sweep, tmp_path):
    table, _, _ = sweep
    other = tmp_path / "check.json"
    other.write_text(json.dumps({"kind": "check", "cells": []}))
    with pytest.raises(UsageError, match="not a support table"):
        publish([other], tmp_path / "site")
    with pytest.raises(UsageError, match="cannot read"):
        publish([tmp_path / "missing.json"], tmp_path / "site")
    with pytest.raises(UsageError, match="at least one"):
        publish([], tmp_path / "site")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fpdiff", "publish", *args], capture_output=True, text=True,
                          timeout=300)


def test_the_command_writes_the_page_and_refuses_bad_input_with_exit_2(sweep, tmp_path):
    table, _, _ = sweep
    ok = _cli(str(table), "--out", str(tmp_path / "site"), "--title", "ours")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "site" / "index.html").is_file() and str(tmp_path / "site" / "SUPPORT.md") in ok.stdout
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    not_json = tmp_path / "notes.json"
    not_json.write_text("not json")
    for args in ([str(tmp_path / "missing.json"), "--out", str(tmp_path / "x")],
                 [str(not_json), "--out", str(tmp_path / "x")],
                 [str(table), "--out", str(a_file)],
                 [str(table), "--out", str(a_file / "below")]):
        p = _cli(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("fpdiff: error: "), p.stderr
        assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_the_page_filters_in_a_browser_without_console_errors(sweep, tmp_path):
    _, report, r = sweep
    page = publish([report], tmp_path / "site")["html"]
    exe = headless.chromium()
    dom = subprocess.run([exe, *headless.FLAGS, "--window-size=1200,900", "--dump-dom", page.as_uri() + "#q=sigmoid"],
                         capture_output=True, text=True, timeout=120)
    assert not headless.console_errors(dom.stderr), headless.console_errors(dom.stderr)
    rows = re.findall(r"<tr ([^>]*data-text=[^>]*)>", dom.stdout)
    shown = [row for row in rows if " hidden" not in row]
    assert len(rows) == len(r.cells) and shown and all("sigmoid" in row for row in shown)
    assert f"{len(shown)} of {len(rows)} rows shown" in dom.stdout


def _cell(op: str, backend: str, status: str, variant: str = "sample", **kw) -> dict:
    return {"catalog": "torch", "op": op, "variant": variant, "backend": backend, "precision": "fp32",
            "status": status, "support": "native", "metrics": None, **kw}


def test_an_exporters_failure_on_the_way_to_a_backend_is_counted_and_listed_as_the_exporters(tmp_path):
    """ORT ran the graph torch.onnx wrote; where that graph computes another function the error is torch.onnx's at
    onnx export, never one of ORT's own failures; ORT's own error, and its own mismatch beside an exporter's error
    in one row, stay ORT's."""
    from fpdiff.analysis.ops.support import support_table
    exporter = {"stage": "onnx export", "component": "torch.onnx"}
    cells = [_cell("nn.functional.interpolate.bilinear", "ort", "error", "antialias", **exporter),
             _cell("nn.functional.interpolate.bilinear", "torch", "pass", "antialias"),
             _cell("exp", "ort", "error", stage="prepare", component="onnxruntime"),
             _cell("resize_", "ort", "error", "transposed", **exporter),
             _cell("resize_", "ort", "mismatch", "transposed"),
             _cell("abs", "ort", "pass")]
    report = tmp_path / "ops.json"
    report.write_text(json.dumps({"kind": "ops", "model": "ops: torch", "versions": {}, "cells": cells,
                                  "support_table": support_table(cells)}))
    written = publish([report], tmp_path / "site")
    md = written["markdown"].read_text()
    cols = md_matrix(md, "ops")[("ort", "fp32")]
    assert (cols["error of torch.onnx at onnx export"], cols["error"], cols["mismatch"], cols["pass"]) == (1, 1, 1, 1)
    ort = md.split("### ort")[1].split("###")[0]
    assert "- fp32 error: 1 op: `exp`" in ort and "- fp32 mismatch: 1 op: `resize_`" in ort, ort
    assert "- fp32 error of torch.onnx at onnx export: 1 op: `nn.functional.interpolate.bilinear`" in ort, ort
    rows = {(r["data-backend"], r["cells"][3]): r["data-status"] for r in parsed(written["html"]).rows}
    assert rows[("ort", "nn.functional.interpolate.bilinear")] == "error of torch.onnx at onnx export"
    assert rows[("ort", "exp")] == "error" and rows[("ort", "resize_")] == "mismatch"


def _report(tmp_path: Path, cells: list[dict], **extra) -> Path:
    from fpdiff.analysis.ops.support import support_table
    report = tmp_path / "ops.json"
    report.write_text(json.dumps({"kind": "ops", "model": "ops: torch", "versions": {"cpu": "Some CPU (x86_64): AVX2"},
                                  "cells": cells, "support_table": support_table(cells), **extra}))
    return report


def _finding(root: Path, folder: str, title: str, **meta) -> Path:
    d = root / folder
    d.mkdir(parents=True)
    (d / "REPORT.md").write_text(f"# {title}\n\nbody\n")
    (d / "finding.json").write_text(json.dumps({"id": folder.split("-x")[0], "kind": "bug", **meta}))
    return d


def test_a_failing_row_names_its_sample_and_reason_and_links_its_finding(tmp_path):
    """The rows people decide from: why (the runtime's words, no worker's temporary folders), which sample, which
    report; a failing row no report covers says 'not triaged', and the Markdown counts both."""
    cells = [_cell("kthvalue", "iree", "error", case="kthvalue#0", description="x: f64[5, 5, 5], k=2",
                   stage="compile", reason="iree-compile failed: /tmp/fpdiff-iree-abc/model.mlir:3: 'tm_tensor.topk' "
                   "op region block must end"),
             _cell("cdist", "openvino", "mismatch", case="cdist#1", description="p=0.0", reason="rel L2 1.0"),
             _cell("abs", "openvino", "pass", case="abs#0", reason="rel L2 0 <= tolerance")]
    findings = tmp_path / "findings"
    _finding(findings, "ops-015-xa", "[iree] kthvalue fails to compile", component="iree", ops=["kthvalue"],
             precisions=["fp32"])
    _finding(findings, "ops-013-xb", "[openvino] cdist p=0", component="openvino", ops=["cdist"], precisions=["fp16"])
    written = publish([_report(tmp_path, cells)], tmp_path / "site", findings=findings)
    rows = {r["cells"][3]: r for r in parsed(written["html"]).rows}
    kth = rows["kthvalue"]["cells"]
    assert "kthvalue#0: x: f64[5, 5, 5], k=2" in kth[11]
    assert kth[12].startswith("at compile: iree-compile failed: model.mlir:3") and "/tmp" not in kth[12], kth[12]
    assert kth[13].strip() == "ops-015"
    text = written["html"].read_text()
    assert "href='../findings/ops-015-xa/REPORT.md'" in text and "title='[iree] kthvalue fails to compile'" in text
    # its finding is of fp16, the row of fp32: not triaged, with the command that runs the row again
    assert rows["cdist"]["cells"][13].strip() == ("not triaged; again: fpdiff ops --catalog torch --ops 'cdist' "
                                                  "--backends openvino --precisions fp32 --variants sample")
    assert rows["abs"]["cells"][12] == "" and rows["abs"]["cells"][13] == ""
    md = written["markdown"].read_text()
    assert "Failing rows (mismatch, error, crash, timeout): 2; 1 link a finding, 1 not triaged yet." in md
    assert "`kthvalue` (ops-015)" in md and "Measured on: Some CPU (x86\\_64): AVX2." in md


def test_ops_the_sweep_did_not_run_are_rows_that_say_why(tmp_path):
    """An op left out by its catalog, or not started before the --time budget ran out, is a row saying so; an op
    the sweep's --ops did not select is not a gap of the table."""
    cells = [_cell("abs", "torch", "pass", case="abs#0")]
    report = _report(tmp_path, cells, skipped=[{"catalog": "torch", "op": "sigmoid", "reason": "no sample"}],
                     unrun=1, unrun_cases=[{"catalog": "torch", "op": "sin", "case": "sin#0"}],
                     selection={"catalogs": ["torch"], "patterns": ["abs", "sigmoid", "sin", "cos"]})
    written = publish([report], tmp_path / "site")
    rows = {r["cells"][3]: r for r in parsed(written["html"]).rows}
    assert set(rows) == {"abs", "sigmoid", "sin", "cos"}  # nothing else of the catalog
    assert rows["sigmoid"]["data-status"] == "not run" and "left out: no sample" in rows["sigmoid"]["cells"][12]
    assert "not started: the --time budget ran out first" in rows["sin"]["cells"][12]
    assert "not started" in rows["cos"]["cells"][12]  # selected, no cell, and the budget ran out
    assert rows["sin"]["data-backend"] == "all"
    md = written["markdown"].read_text()
    assert "Ops judged: 1; not run: 3 (2 not started, 1 left out; each a row on the page)." in md
    assert ("torch", "fp32") in md_matrix(md, "ops") and ("all", "all") not in md_matrix(md, "ops")
    text = written["html"].read_text()
    assert "<h2>By op</h2>" in text and "not run: left out: no sample" in text


def test_the_page_data_makes_the_same_page_again_with_other_links(tmp_path):
    """support.json (what the docs build reads) gives the same rows; a findings folder's links are the caller's."""
    cells = [_cell("kthvalue", "iree", "error", case="kthvalue#0", reason="no")]
    findings = tmp_path / "findings"
    _finding(findings, "ops-015-xa", "kth", component="iree", ops=["kthvalue"])
    first = publish([_report(tmp_path, cells)], tmp_path / "a", findings=findings)
    again = publish([first["data"]], tmp_path / "b", findings=findings, finding_url="../findings/{folder}/")
    rows = [[r["cells"][:13] for r in parsed(w["html"]).rows] for w in (first, again)]
    assert rows[0] == rows[1]
    assert "href='../findings/ops-015-xa/'" in again["html"].read_text()
    assert first["markdown"].read_text() == again["markdown"].read_text()


def test_a_findings_folder_that_cannot_be_read_is_one_line(tmp_path, sweep):
    _, report, _ = sweep
    with pytest.raises(UsageError, match="not a folder of findings"):
        publish([report], tmp_path / "site", findings=tmp_path / "none")
    bad = tmp_path / "findings" / "ops-1"
    bad.mkdir(parents=True)
    (bad / "finding.json").write_text("{not json")
    with pytest.raises(UsageError, match=r"ops-1/finding.json cannot be read"):
        publish([report], tmp_path / "site", findings=tmp_path / "findings")
    p = _cli(str(report), "--out", str(tmp_path / "x"), "--findings", str(tmp_path / "none"))
    assert p.returncode == 2 and p.stderr.startswith("fpdiff: error: --findings") and "Traceback" not in p.stderr


def test_every_finding_in_the_repository_reads_and_names_a_component_and_ops():
    """findings/*/finding.json: what the published table links by; each names a title, a component and its ops."""
    from fpdiff.report.findings import load
    found = load(Path(__file__).resolve().parents[2] / "findings", "{folder}")
    assert len(found) >= 30
    assert all(f.title and f.component and f.ops for f in found)
    assert len({f.id for f in found}) == len(found)
