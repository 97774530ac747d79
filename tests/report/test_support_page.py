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
    assert set(written) == {"html", "markdown"} and all(p.is_file() for p in written.values())
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
