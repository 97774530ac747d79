"""A run as JUnit XML, the format every CI shows: one testcase per cell, failing exactly as the exit code. Written
for the kinds whose results have cells (SUITES)."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from fpdiff.core.errors import UsageError
from fpdiff.core.status import Status, fails


def _findings(cell) -> str:
    lines = []
    for f in cell.findings:
        lines.append(f"{f.kind}: {f.message}" + (f"\n  remedy: {f.remedy}" if f.remedy else ""))
    return "\n".join(lines)


def junit(result, strict: bool = False) -> ET.ElementTree:
    """The run's testsuite, by its kind."""
    if result.kind not in SUITES:
        raise UsageError(f"JUnit XML is written for {', '.join(SUITES)} runs, not {result.kind}")
    return SUITES[result.kind](result, strict)


def _check_suite(result, strict: bool = False) -> ET.ElementTree:
    """A testsuite for the model; failures, skips (declared refusals) and passes follow check's exit rule."""
    suite = ET.Element("testsuite", name=f"fpdiff check {result.model}", tests=str(len(result.cells)),
                       time=f"{result.duration_s:.3f}")
    props = ET.SubElement(suite, "properties")
    for k, v in sorted((result.versions or {}).items()):
        ET.SubElement(props, "property", name=f"version.{k}", value=str(v))
    if result.judge:
        ET.SubElement(props, "property", name="judge", value=str(result.judge.get("status", "")))
    failures = skipped = 0
    for c in result.cells:
        case = ET.SubElement(suite, "testcase", classname=f"fpdiff.{c.backend}",
                             name=f"{c.backend}/{c.device}/{c.precision}/{c.shape_variant}", time=f"{c.duration_s:.3f}")
        detail = "\n".join(x for x in (c.reason, _findings(c)) if x)
        if fails(c.status, [f.kind for f in c.findings], strict):
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


def _ops_suite(result, strict: bool = False) -> ET.ElementTree:
    """A testsuite for the sweep: a testcase per cell, failing as the sweep's exit code; declared refusals skip."""
    suite = ET.Element("testsuite", name=f"fpdiff {result.model}", tests=str(len(result.cells)),
                       time=f"{result.duration_s:.3f}")
    props = ET.SubElement(suite, "properties")
    for k, v in sorted((result.versions or {}).items()):
        ET.SubElement(props, "property", name=f"version.{k}", value=str(v))
    failures = skipped = 0
    for c in result.cells:
        case = ET.SubElement(suite, "testcase", classname=f"ops.{c.catalog}.{c.op}",
                             name=f"{c.case} {c.backend} {c.precision} {c.shape_variant}", time=f"{c.duration_s:.3f}")
        repro = (c.repro or {}).get("path")
        detail = "\n".join(x for x in (c.reason, _findings(c), f"repro: {repro}" if repro else "") if x)
        if result.cell_fails(c, strict):
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


SUITES = {"check": _check_suite, "ops": _ops_suite}


def write(result, path: str | Path, strict: bool = False) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tree = junit(result, strict)
    ET.indent(tree)
    tree.write(p, encoding="utf-8", xml_declaration=True)
