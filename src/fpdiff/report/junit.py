"""A run as JUnit XML, the format every CI shows: one testcase per cell, failing exactly as the exit code. Written
for the analyses whose results have cells (check_suite, ops_suite; each analysis declares its own)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from fpdiff.core.status import Status, fails


def _findings(cell) -> str:
    lines = []
    for f in cell.findings:
        lines.append(f"{f.kind}: {f.message}" + (f"\n  remedy: {f.remedy}" if f.remedy else ""))
    return "\n".join(lines)


def _suite(title: str, result) -> ET.Element:
    """The testsuite element with the run's versions as properties."""
    suite = ET.Element("testsuite", name=title, tests=str(len(result.cells)), time=f"{result.duration_s:.3f}")
    props = ET.SubElement(suite, "properties")
    for k, v in sorted((result.versions or {}).items()):
        ET.SubElement(props, "property", name=f"version.{k}", value=str(v))
    return suite


def _cases(suite: ET.Element, rows: list[tuple]) -> ET.ElementTree:
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


def check_suite(result, strict: bool = False) -> ET.ElementTree:
    """A testsuite for the model; failures, skips (declared refusals) and passes follow check's exit rule."""
    suite = _suite(f"fpdiff check {result.model}", result)
    if result.judge:
        ET.SubElement(suite.find("properties"), "property", name="judge", value=str(result.judge.get("status", "")))
    return _cases(suite, [(c, f"fpdiff.{c.backend}", f"{c.backend}/{c.device}/{c.precision}/{c.shape_variant}",
                           fails(c.status, [f.kind for f in c.findings], strict), "") for c in result.cells])


def ops_suite(result, strict: bool = False) -> ET.ElementTree:
    """A testsuite for the sweep: a testcase per cell, failing as the sweep's exit code; declared refusals skip."""
    return _cases(_suite(f"fpdiff {result.model}", result),
                  [(c, f"ops.{c.catalog}.{c.op}", f"{c.case} {c.backend} {c.precision} {c.shape_variant}",
                    result.cell_fails(c, strict), f"repro: {c.repro['path']}" if (c.repro or {}).get("path") else "")
                   for c in result.cells])


def write(tree: ET.ElementTree, path: str | Path) -> None:
    """The testsuite an analysis's declaration made (check_suite, ops_suite, a plugin's own), written as a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    ET.indent(tree)
    tree.write(p, encoding="utf-8", xml_declaration=True)
