"""A run as JUnit XML, the format every CI shows: one testcase per cell, failing exactly as the exit code. Each
analysis whose result has cells declares its suite (fpdiff/analyses/check, ops) from the parts here."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from fpdiff.core.status import Status


def _findings(cell) -> str:
    lines = []
    for f in cell.findings:
        lines.append(f"{f.kind}: {f.message}" + (f"\n  remedy: {f.remedy}" if f.remedy else ""))
    return "\n".join(lines)


def testsuite(title: str, result) -> ET.Element:
    """The testsuite element with the run's versions as properties."""
    suite = ET.Element("testsuite", name=title, tests=str(len(result.cells)), time=f"{result.duration_s:.3f}")
    props = ET.SubElement(suite, "properties")
    for k, v in sorted((result.versions or {}).items()):
        ET.SubElement(props, "property", name=f"version.{k}", value=str(v))
    return suite


def testcases(suite: ET.Element, rows: list[tuple]) -> ET.ElementTree:
    """One testcase per (cell, classname, name, fails, extra detail): failing as the exit code, declared refusals
    and held verdicts skipped, the reason and findings as the case's output."""
    failures = skipped = 0
    for c, classname, name, failing, extra in rows:
        case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{c.duration_s:.3f}")
        detail = "\n".join(x for x in (c.reason, _findings(c), extra) if x)
        if failing:
            failures += 1
            el = ET.SubElement(case, "failure", message=f"{c.status}: {c.reason}"[:500], type=str(c.status))
            el.text = detail
        elif c.status in (Status.UNSUPPORTED, Status.UNJUDGED, Status.ILL_CONDITIONED):
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{c.status}: {c.reason}"[:500])
        if detail:
            ET.SubElement(case, "system-out").text = detail
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    suite.set("errors", "0")
    return ET.ElementTree(suite)


def write(tree: ET.ElementTree, path: str | Path) -> None:
    """The testsuite an analysis's declaration made (check_suite, ops_suite, a plugin's own), written as a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(tree)
    tree.write(p, encoding="utf-8", xml_declaration=True)
