"""JUnit XML: one testcase per cell, failing exactly where the exit code fails, with reasons and findings."""
import xml.etree.ElementTree as ET

import pytest

from fpdiff import analyses
from fpdiff.analysis.check import Cell, CheckResult
from fpdiff.cli import main
from fpdiff.core.compare import Finding
from fpdiff.report import junit


def result():
    cells = [
        Cell("torch", "cpu", "fp32", "static", "pass", "rel L2 1e-07 <= tolerance"),
        Cell("openvino", "cpu", "fp16", "static", "pass", "rel L2 3e-03 <= tolerance",
             findings=[Finding("dtype-changed", "asked for f16 and runs bf16", remedy="read it as bf16")]),
        Cell("iree", "cpu", "fp16", "static", "mismatch", "rel L2 1.0 is 900x the baseline's",
             findings=[Finding("nan", "3 output values are NAN")]),
        Cell("ort", "cpu", "bf16", "static", "unsupported", "no kernel for MatMul in bfloat16"),
        Cell("inductor", "cpu", "fp16", "static", "precision-loss", "within 4x the baseline's"),
    ]
    return CheckResult("example:tinycnn", cells, {}, {"torch": "2.13.0"}, 12.5)


def parse(tree):
    suite = tree.getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    return suite, cases


@pytest.mark.parametrize("strict", [False, True])
def test_failures_and_skips_follow_the_exit_rule(strict):
    r = result()
    suite, cases = parse(analyses.junit_suite(r, strict=strict))
    failed = {n for n, c in cases.items() if c.find("failure") is not None}
    # --strict: anything but a clean pass fails, refusals included (as the exit code)
    want = {"iree/cpu/fp16/static"} | ({"openvino/cpu/fp16/static", "inductor/cpu/fp16/static",
                                        "ort/cpu/bf16/static"} if strict else set())
    assert failed == want and int(suite.get("failures")) == len(want)
    assert (len(failed) > 0) == bool(r.exit_code(strict=strict))
    if not strict:
        assert cases["ort/cpu/bf16/static"].find("skipped").get("message").startswith("unsupported: no kernel")
    body = cases["iree/cpu/fp16/static"].find("failure").text
    assert "900x" in body and "nan: 3 output values are NAN" in body


def test_the_file_is_xml_a_ci_reads(tmp_path):
    path = tmp_path / "out" / "fpdiff.xml"
    junit.write(analyses.junit_suite(result()), path)
    suite = ET.parse(path).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "5"
    assert suite.find("properties/property[@name='version.torch']").get("value") == "2.13.0"


def test_an_unwritable_junit_path_is_one_line(capsys):
    code = main(["check", "example:tinycnn", "--backends", "torch", "--precisions", "fp32", "--repeat", "1",
                 "--junit", "/proc/no/fpdiff.xml"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot write JUnit XML to /proc/no/fpdiff.xml" in err and err.count("\n") == 1
