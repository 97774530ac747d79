"""The HTML report: one offline file from any report JSON, foreign input refused in one line, and what a browser
shows of it (headless Chromium: no console errors, every plot rendered, a screenshot to look at)."""
import json
import re
import subprocess

import headless
import pytest

from fpdiff import analyses
from fpdiff.analysis.check import Cell, CheckResult
from fpdiff.cli import main
from fpdiff.core.compare import Finding
from fpdiff.report.json_report import cleaned


def check_report():
    cells = [Cell("torch", "cpu", "fp16", "static", "pass", "rel L2 4e-04 <= tolerance", metrics={"rel_l2": 4e-4}),
             Cell("iree", "cpu", "fp16", "static", "mismatch", "rel L2 0.9 is 2000x the baseline's",
                  metrics={"rel_l2": 0.9}, findings=[Finding("nan", "3 values are NAN", remedy="look at the pad")]),
             Cell("ort", "cpu", "bf16", "static", "unsupported", "no bf16 kernel for Conv")]
    return cleaned(CheckResult("example:tinycnn", cells, {"backend": "torch", "device": "cpu"},
                               {"torch": "2.13.0"}, 1.0, judge={"status": "agrees"}).as_dict())


def test_a_check_report_is_one_offline_file_with_the_grid_and_findings():
    text = analyses.html_page(check_report())
    # nothing to fetch and nothing to run: no script, no stylesheet link, no remote src/href (SVG's xmlns are names)
    assert "<script" not in text and "<link" not in text and not re.findall(r"(?:src|href)=[\"']https?://", text)
    assert text.count("<svg") == 1 and "title='rel L2 0.9 is 2000x the baseline&#x27;s\nnan: 3 values are NAN'" in text
    assert "remedy: look at the pad" in text and "2.13.0" in text and len(text) < 200_000


@pytest.mark.parametrize("content, words", [
    ("{not json", "is not JSON"),
    ('{"hello": 1}', "not an fpdiff report"),
    ("[1, 2]", "not an fpdiff report"),
])
def test_corrupt_or_foreign_json_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, content, words):
    src, out = tmp_path / "run.json", tmp_path / "report.html"
    src.write_text(content)
    assert main(["report", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and not out.exists()


def test_an_unwritable_output_is_one_line(tmp_path, capsys):
    src = tmp_path / "run.json"
    src.write_text(json.dumps(check_report()))
    assert main(["report", str(src), "-o", "/proc/no/report.html"]) == 2
    assert "cannot write HTML to /proc/no/report.html" in capsys.readouterr().err


@pytest.fixture(scope="module")
def chromium():
    return headless.chromium()


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["check", "example:tinycnn", "--backends", "torch,ort,openvino", "--precisions", "fp32,fp16,bf16", "--repeat", "1"],
    ["locate", "example:rmsnorm", "--precision", "fp16", "--no-repro"],
    ["ranges", "example:rmsnorm"],
    ["plan", "example:rmsnorm", "--no-speed"],
])
def test_every_report_renders_in_a_real_browser(chromium, tmp_path, command):
    page = tmp_path / f"{command[0]}.html"
    main([*command, "--html", str(page)] + (["--no-store"] if command[0] != "ranges" else []))
    run = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
           "--window-size=1400,1600"]
    dom = subprocess.run([*run, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    shot = tmp_path / f"{command[0]}.png"
    subprocess.run([*run, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)
    console = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not console, console
    assert dom.stdout.count("<svg") >= 1 and "<h1>fpdiff " in dom.stdout  # every plot made it into the page
    assert shot.stat().st_size > 20_000  # a page was drawn, not a blank


def test_without_matplotlib_the_report_is_whole_and_says_how_to_get_plots(monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)  # import matplotlib fails as when missing
    text = analyses.html_page(check_report())
    err = capsys.readouterr().err
    assert "<svg" not in text and "pip install &#x27;fpdiff[html]&#x27;" in text and "<h2>Errors</h2>" in text
    assert "rel L2 0.9 is 2000x" in text  # the grid is all there
    assert err.count("\n") == 1 and "pip install 'fpdiff[html]'" in err


def test_the_page_follows_the_reports_kind_and_refuses_an_unknown_one(tmp_path, capsys):
    report = check_report()
    assert report["kind"] == "check" and "Grid, shapes: static" in analyses.html_page(report)
    src, out = tmp_path / "run.json", tmp_path / "report.html"
    src.write_text(json.dumps({**report, "kind": "wobble"}))
    assert main(["report", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "kind 'wobble'" in err and err.count("\n") == 1 and not out.exists()


def test_a_report_written_before_kind_is_read_once_with_a_deprecation_line(tmp_path, capsys):
    src, out = tmp_path / "run.json", tmp_path / "report.html"
    src.write_text(json.dumps({k: v for k, v in check_report().items() if k != "kind"}))
    assert main(["report", str(src), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "has no \"kind\"" in err and "read as a check report" in err and "deprecated" in err
    assert "Grid, shapes: static" in out.read_text()


def test_the_next_commands_are_in_the_page():
    locate = "fpdiff locate example:tinycnn --backend iree --precision fp16"
    text = analyses.html_page({**check_report(), "next": [locate]})
    assert "<code>fpdiff locate example:tinycnn --backend iree --precision fp16</code>" in text


def test_a_cells_hover_says_which_rules_made_its_verdict():
    cell = Cell("openvino", "cpu", "fp32", "static", "ok", metrics={"rel_l2": 1.2})
    cell.revise("float64", "mismatch", "rel L2 1.2 is 40x the baseline's")
    cell.revise("conditioning", "ill-conditioned", "the reference moves as much", why="spread 1.1, within 4x")
    report = cleaned(CheckResult("m", [cell], {"backend": "onnxref", "device": "cpu"}, {}, 1.0).as_dict())
    text = analyses.html_page(report)
    assert ("verdict by rule:\nfloat64: ok -&gt; mismatch (rel L2 1.2 is 40x the baseline&#x27;s)\n"
            "conditioning: mismatch -&gt; ill-conditioned (spread 1.1, within 4x)") in text
