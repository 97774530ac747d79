"""A result in a notebook: its report as an HTML fragment (no page around it, its CSS scoped, readable on a light and
a dark theme, drawn by a real browser in a page made like a notebook), its rows as a DataFrame holding the report's
data, print() as the terminal shows it, a one-line repr; a user's analysis gets all of it by registering."""
import dataclasses
import html
import importlib.util
import io
import json
import math
import re
import shutil
import sys

import headless
import pytest
from rich.console import Console

import fpdiff
from conftest import PLUGINS
from fpdiff import analyses
from fpdiff.analysis.base import Result
from fpdiff.analysis.check import Cell, CheckResult
from fpdiff.core.compare import Finding
from fpdiff.core.errors import UsageError
from fpdiff.report.json_report import cleaned
from fpdiff.report.notebook import TEXT_WIDTH

# each analysis run small and fast, the way a notebook would call it
RUNS = {
    "check": lambda: fpdiff.check("example:tinycnn", backends=["torch", "ort"], precisions=["fp16"], repeat=1),
    "locate": lambda: fpdiff.locate("example:rmsnorm", precision="fp16", repro=None),
    "ranges": lambda: fpdiff.ranges("example:rmsnorm"),
    "plan": lambda: fpdiff.plan("example:rmsnorm", measure_speed=False),
    "ops": lambda: fpdiff.ops(catalogs=["torch"], patterns=["abs"], variants=["sample"], backends=["torch"],
                              precisions=["fp16"], repro_dir=None),
    "fuzz": lambda: fpdiff.fuzz(graphs=2, backends=["torch"], precisions=["fp16"], repro_dir=None, seed=1),
}
PAGE_TAGS = re.compile(r"<(?:html|head|body|script|link|iframe|h[1-6])\b", re.I)


class Ran(dict):
    """Each analysis run once for the module, when a test first asks for it."""

    def __missing__(self, kind: str) -> Result:
        self[kind] = result = RUNS[kind]()
        return result


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    with pytest.MonkeyPatch.context() as m:  # whatever a run writes stays out of the checkout
        m.chdir(tmp_path_factory.mktemp("notebook"))
        yield Ran()


def source_rows(kind: str, report: dict) -> list[dict]:
    """The records of the report each DataFrame row stands for, read straight from the JSON."""
    if kind == "fuzz":
        return [{**{k: v for k, v in g.items() if k != "statuses"}, "backend": where and where.rpartition("/")[0],
                 "precision": where and where.rpartition("/")[2], "status": status}
                for g in report["records"] for where, status in (g["statuses"] or {None: None}).items()]
    key = {"check": "cells", "ops": "cells", "locate": "ops", "ranges": "ops", "plan": "keep"}[kind]
    return report[key]


def columns(record: dict) -> dict:
    """A report record as the DataFrame's columns: metrics one column each, the baseline's and each precision's
    judgement (ranges) prefixed."""
    out = {}
    for k, v in record.items():
        if k == "metrics":
            out.update(v or {})
        elif k == "baseline_metrics":
            out.update({f"baseline_{m}": x for m, x in (v or {}).items()})
        elif k == "dtypes":
            out.update({f"{name}_{m}": x for name, d in v.items() for m, x in d.items()})
        else:
            out[k] = v
    return out


def same(a, b) -> bool:
    """Equal as the report holds it: None and NaN both missing, "inf" the JSON's spelling of inf."""
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    if b in ("inf", "-inf"):
        return a == float(b)
    return a == b


def must_show(kind: str, report: dict) -> list[str]:
    """What the fragment must say for each analysis: its cells, verdicts, culprits, kept ops."""
    esc = html.escape
    if kind == "check":
        return ["Grid, shapes: static", *(c["backend"] for c in report["cells"]),
                *(f"<b>{c['status']}</b>" for c in report["cells"])]
    if kind == "locate":
        return [esc(report["culprit"]["op"]), "Ops", *(esc(o["op"]) for o in report["ops"])]
    if kind == "ranges":
        return ["Risks", *(esc(o["op"]) for o in report["ops"] if any(d["risks"] for d in o["dtypes"].values()))]
    if kind == "plan":
        return ["verified plan" if report["passed"] else "no plan", "Ops kept in fp32",
                *(esc(k["node"]) for k in report["keep"])]
    if kind == "ops":
        return [f"{len(report['cells'])} cells judged against float64", *report["matrix"]]
    return [f"{report['graphs']} graphs tested on", "Findings"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(RUNS))
def test_a_result_shows_its_reports_body_without_the_page(ran, kind):
    result = ran[kind]
    fragment = result._repr_html_()
    report = cleaned(result.as_dict())
    assert fragment.startswith("<div class='fpdiff-result'><style>") and fragment.endswith("</div>")
    assert not PAGE_TAGS.findall(fragment) and not re.findall(r"(?:src|href)=[\"']https?://", fragment)
    assert f"fpdiff {kind} {report['model']}" in fragment
    missing = [s for s in must_show(kind, report) if s not in fragment]
    assert not missing, missing
    if kind in ("check", "locate", "ranges", "plan"):  # the page's plots are in the fragment too
        assert fragment.count("<svg") >= 1


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(RUNS))
def test_to_pandas_holds_the_reports_rows(ran, kind):
    result = ran[kind]
    frame = result.to_pandas()
    expected = [columns(r) for r in source_rows(kind, cleaned(result.as_dict()))]
    assert len(frame) == len(expected) > 0
    rows = frame.to_dict("records")
    wrong = [(i, k, row.get(k), v) for i, (row, want) in enumerate(zip(rows, expected)) for k, v in want.items()
             if not same(row.get(k), v)]
    assert not wrong, wrong[:5]
    if kind == "check":
        assert list(frame.columns[:5]) == ["backend", "device", "precision", "shape_variant", "status"]
        assert {"rel_l2", "reason", "findings"} <= set(frame.columns) and frame["rel_l2"].dtype.kind == "f"


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(RUNS))
def test_print_shows_the_terminal_and_repr_is_one_line(ran, kind):
    result = ran[kind]
    out = io.StringIO()
    width = shutil.get_terminal_size((TEXT_WIDTH, 24)).columns
    analyses.show(result, Console(file=out, width=width, color_system=None, force_terminal=False,
                                  force_jupyter=False))
    assert str(result) == out.getvalue().rstrip("\n") and str(result)
    line = repr(result)
    n = len(result.to_pandas())
    assert "\n" not in line and len(line) < 200
    assert line.startswith(f"<{type(result).__name__} {kind} {result.model}: {n} row")


@pytest.mark.slow
def test_a_checks_terminal_table_and_its_rejudged_copy(ran):
    result = ran["check"]
    assert "fpdiff check example:tinycnn" in str(result) and "┏" in str(result) and "fp16" in str(result)
    again = fpdiff.rejudge(cleaned(result.as_dict()))
    assert "judged again" in str(again) and "Grid, shapes: static" in again._repr_html_()
    assert len(again.to_pandas()) == len(result.cells)


def small_check() -> CheckResult:
    cells = [Cell("torch", "cpu", "fp16", "static", "pass", "rel L2 4e-04 <= tolerance", metrics={"rel_l2": 4e-4}),
             Cell("iree", "cpu", "fp16", "static", "mismatch", "rel L2 inf <b>not markup</b>",
                  metrics={"rel_l2": float("inf")}, findings=[Finding("nan", "3 values are NAN", remedy="pad")])]
    return CheckResult("example:tinycnn", cells, {"backend": "torch", "device": "cpu"}, {"torch": "2.13.0"}, 1.0,
                       judge={"status": "agrees"})


def test_the_fragments_css_is_scoped_to_it_and_its_plots_keep_their_ids_to_themselves():
    fragment = small_check()._repr_html_()
    css = "".join(re.findall(r"<style[^>]*>(.*?)</style>", fragment, re.S))
    selectors = [s.strip() for block in re.findall(r"([^{}]+)\{", css) for s in block.split(",")]
    assert selectors and all(s.startswith(".fpdiff-result") for s in selectors), selectors
    assert "&lt;b&gt;not markup&lt;/b&gt;" in fragment and "<b>not markup</b>" not in fragment
    if "<svg" in fragment:  # matplotlib installed: its ids are only those something refers to
        assert 'id="figure_1"' not in fragment and 'id="axes_1"' not in fragment


def test_a_frame_gets_numbers_back_where_the_json_spells_them():
    frame = small_check().to_pandas()
    assert frame["rel_l2"].tolist() == [4e-4, float("inf")] and frame["status"].tolist() == ["pass", "mismatch"]
    assert frame.loc[1, "findings"] == [Finding("nan", "3 values are NAN", remedy="pad").as_dict()]


def test_without_matplotlib_the_fragment_is_whole_and_says_how_to_get_plots(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails as when it is not installed
    fragment = small_check()._repr_html_()
    assert "<svg" not in fragment and "pip install &#x27;fpdiff[html]&#x27;" in fragment and "4.0e-04" in fragment
    assert "Grid, shapes: static" in fragment and capsys.readouterr().err == ""


def test_without_pandas_to_pandas_is_one_usage_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails as when it is not installed
    with pytest.raises(UsageError, match=r"^to_pandas\(\) needs pandas: pip install pandas$"):
        small_check().to_pandas()


class Lone(Result):
    """A result whose kind no registered analysis declares."""
    kind = "lone"
    model = "<m&n>"

    def as_dict(self) -> dict:
        return {"kind": self.kind, "model": self.model, "peak": 2.0, "notes": ["x"]}

    def exit_code(self, strict: bool = False) -> int:
        return 0


def test_a_kind_with_no_view_is_escaped_text_and_its_fields_one_row():
    r = Lone()
    assert repr(r) == str(r) == "<Lone lone <m&n>: 1 row>"
    assert r._repr_html_() == "<pre>&lt;Lone lone &lt;m&amp;n&gt;: 1 row&gt;</pre>"
    assert r.to_pandas().to_dict("records") == [{"kind": "lone", "model": "<m&n>", "peak": 2.0}]


@pytest.fixture
def toy(monkeypatch):
    """tests/plugins/toy_analysis.py registered in this process, as a notebook would (the built-ins set aside)."""
    spec = importlib.util.spec_from_file_location("toy_analysis", PLUGINS / "toy_analysis.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry = analyses.Analyses()
    registry.register(module.TOY)
    monkeypatch.setattr(analyses, "registered", lambda: registry)
    return module


def test_a_users_analysis_shows_in_a_notebook_by_registering_alone(toy):
    r = toy.ToyResult("example:tinycnn", 3.5, 1e6, 0)
    fragment = r._repr_html_()
    assert fragment.startswith("<div class='fpdiff-result'>")
    assert "<p class='toy'>peak 3.5 against 1e+06</p>" in fragment
    assert str(r) == "toy peak of example:tinycnn: 3.5\nnext: fpdiff ranges example:tinycnn"
    assert repr(r) == "<ToyResult toy example:tinycnn: 1 row>"
    assert r.to_pandas().to_dict("records") == [{"kind": "toy", "model": "example:tinycnn", "peak": 3.5,
                                                 "limit": 1e6, "seed": 0}]


def test_a_users_analysis_may_declare_its_rows_and_a_wrong_declaration_is_one_line(toy):
    analyses.registered().register(dataclasses.replace(toy.TOY, rows=lambda report: [{"peak": report["peak"]}] * 2))
    r = toy.ToyResult("example:tinycnn", 3.5, 1e6, 0)
    assert r.to_pandas().to_dict("records") == [{"peak": 3.5}] * 2 and repr(r).endswith(": 2 rows>")
    with pytest.raises(UsageError, match="analysis toy: rows must be a function or None"):
        analyses.Analyses().register(dataclasses.replace(toy.TOY, rows="peak"))


# A page made like a notebook: its own CSS (headings, tables, an icon's strokes) that the fragments must leave alone,
# a narrow output column beside a prompt, a markdown cell and a code cell around each output; and a probe that
# writes what the browser computed into the page, for --dump-dom to read.
THEMES = {"light": ("#ffffff", "#1f1f1f", "#f5f5f5"), "dark": ("#111111", "#d4d4d4", "#1e1e1e")}
NOTEBOOK = """<!DOCTYPE html><html><head><meta charset='utf-8'><title>notebook</title><style>
body{{margin:0;background:{bg};color:{fg};font-family:sans-serif}}
.nb{{width:860px;margin:16px auto}} .cell{{display:flex;margin:10px 0}}
.prompt{{width:70px;color:#888;font-family:monospace;text-align:right;padding-right:8px;flex:none}}
.area{{width:760px;min-width:0}} pre.code{{background:{code};margin:0;padding:8px;font-size:13px}}
h2{{font-size:26px;margin:6px 0}} td{{padding:10px;border:2px solid #888}} svg.icon path{{stroke:#888;fill:none}}
</style></head><body><div class='nb'>
<div class='cell'><div class='prompt'></div><div class='area'><h2 id='nb-title'>Numerics, every backend</h2>
<table><tr><td id='nb-td'>a notebook's own table</td></tr></table>
<svg class='icon' width='40' height='20'><path id='nb-path' d='M2 18 L20 2 L38 18' stroke-width='4'/></svg></div>
</div>{cells}</div><pre id='probe'></pre><script>
const out = {{}};
out.h2 = getComputedStyle(document.getElementById('nb-title')).fontSize;
out.td = getComputedStyle(document.getElementById('nb-td')).paddingTop;
out.join = getComputedStyle(document.getElementById('nb-path')).strokeLinejoin;
out.area = document.querySelector('.area').clientWidth;
const widths = sel => [...document.querySelectorAll(sel)].map(e => e.getBoundingClientRect().width);
out.widest = Math.max(...widths('.fpdiff-result'), ...widths('.fpdiff-result svg'));
out.text = getComputedStyle(document.querySelector('.fpdiff-result p')).color;
out.body = getComputedStyle(document.body).color;
const verdict = getComputedStyle(document.querySelector('.fpdiff-result td[style*=background]'));
out.verdict = [verdict.color, verdict.display];
out.height = document.documentElement.scrollHeight;
document.getElementById('probe').textContent = JSON.stringify(out);
</script></body></html>"""
CELL = ("<div class='cell'><div class='prompt'>In [{n}]:</div><div class='area'><pre class='code'>"
        "r = fpdiff.{kind}(...)\nr</pre></div></div>"
        "<div class='cell'><div class='prompt'>Out[{n}]:</div><div class='area'>{fragment}</div></div>")


@pytest.mark.slow
@pytest.mark.parametrize("theme", list(THEMES))
def test_the_fragments_render_in_a_notebook_like_page(ran, tmp_path, theme):
    chromium = headless.chromium()
    bg, fg, code = THEMES[theme]
    cells = "".join(CELL.format(n=n, kind=kind, fragment=ran[kind]._repr_html_()) for n, kind in enumerate(RUNS, 1))
    page = tmp_path / f"notebook-{theme}.html"
    page.write_text(NOTEBOOK.format(bg=bg, fg=fg, code=code, cells=cells))
    dom = headless.dom(chromium, page, 1000, 1200)
    assert not headless.console_errors(dom.stderr), headless.console_errors(dom.stderr)
    probe = json.loads(re.search(r"<pre id=\"probe\">(.*?)</pre>", dom.stdout, re.S).group(1))
    assert (probe["h2"], probe["td"], probe["join"]) == ("26px", "10px", "miter")  # the notebook's own CSS holds
    assert probe["widest"] <= probe["area"]  # tables scroll and plots shrink inside the output column
    assert probe["text"] == probe["body"]  # the theme's own text colour
    assert probe["verdict"] == ["rgb(26, 26, 26)", "table-cell"]  # dark on a verdict's colour; the page's .cell apart
    shot = tmp_path / f"notebook-{theme}.png"
    headless.screenshot(chromium, page, shot, 1000, min(probe["height"], 12000))
    image = pytest.importorskip("PIL.Image").open(shot).convert("RGB")
    small = image.resize((image.width // 4, image.height // 4))
    colours = small.getcolors(1 << 20) or []
    drawn = sum(n for n, c in colours if c != small.getpixel((0, 0)))
    assert len(colours) > 50 and drawn > 0.05 * small.width * small.height  # a notebook was drawn, not a blank
