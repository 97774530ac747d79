"""Published results: saved support tables (`fpdiff ops --save`) or op sweeps' JSON reports (`fpdiff ops --json`)
turned into what a user choosing a backend reads: one self-contained, searchable HTML page (index.html: inline CSS
and script, nothing fetched, opens from file://) and a Markdown summary (SUPPORT.md), each saying per backend and
its version which ops it computes at each precision, in the runtime's own word, and how far from float64. Tables of
one stack at different versions (an upgrade) also say what the newer gained and lost (store.diff_tables)."""
from __future__ import annotations

import dataclasses
import functools
import html
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fpdiff.core.errors import UsageError
from fpdiff.core.status import CELL_STATUSES, FAILING, Status
from fpdiff.report import store
from fpdiff.report.html import STYLE

INDEX, MARKDOWN, DATA = "index.html", "SUPPORT.md", "support.json"
PAGE_KIND = "ops-support-page"  # the kind of DATA: the page's rows, which publish (and the docs build) reads again
REASON_CHARS = 400  # a row's reason is cut there: a compiler's whole diagnostic would bury the table (the repro has it)
NOT_RUN = "not run"  # the status of a catalog op the sweep judged no case of (its reason says why)
ALL = "all"  # the backend and precision of a not-run row: no backend or precision ran it
NOT_SAID = "-"  # a support state or status the table does not hold (a plain --save table has no status)
SUPPORT_ONLY = ("a saved support table records support alone; publish the sweep's --json report for each row's "
                "status and error against float64")
ALL_VARIANTS = "all"  # the variant of a --save table's row: its variants are merged into the row
STATES = ("native", "other-dtype", "not-implemented")  # the support states, best to worst (analysis/ops/case.py)
SUPPORT_COLOUR = {"native": "#c8e6c9", "other-dtype": "#fff59d", "not-implemented": "#e0e0e0"}
MOVE_COLOUR = {"gained": "#c8e6c9", "lost": "#ef9a9a"}
PAGE_STYLE = STYLE + """
.controls{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd}
.controls input,.controls select{font-size:14px;padding:3px 6px;margin-right:8px}#q{width:320px}
td.num{text-align:right;font-family:ui-monospace,monospace;white-space:nowrap}td.detail{color:#555;font-size:12px}
td.click{cursor:pointer}td.click:hover{outline:2px solid #1565c0}table.byop td.cell{min-width:54px;font-size:12px}
.machine{background:#e3f2fd;padding:6px 10px;border-left:4px solid #1565c0}a.finding-link{margin-right:4px}"""
# the search box and the filters: every row keeps its words in data-text and its facets in data-*
SCRIPT = """(function(){
var q=document.getElementById('q'),shown=document.getElementById('shown');
var sel=Array.prototype.slice.call(document.querySelectorAll('select.filter'));
var rows=Array.prototype.slice.call(document.querySelectorAll('#ops tbody tr'));
function apply(){var words=q.value.toLowerCase().split(/\\s+/).filter(Boolean),n=0;
 rows.forEach(function(r){var ok=words.every(function(w){return r.dataset.text.indexOf(w)>=0;});
  sel.forEach(function(s){if(s.value&&r.dataset[s.dataset.facet]!==s.value)ok=false;});
  r.hidden=!ok;if(ok)n++;});
 shown.textContent=n+' of '+rows.length+' rows shown';}
if(location.hash.indexOf('#q=')===0)q.value=decodeURIComponent(location.hash.slice(3));
q.addEventListener('input',function(){apply();history.replaceState(null,'','#q='+encodeURIComponent(q.value));});
sel.forEach(function(s){s.addEventListener('change',apply);});
document.querySelectorAll('td.click').forEach(function(td){td.addEventListener('click',function(){
 sel.forEach(function(s){s.value=td.dataset[s.dataset.facet]||'';});q.value=td.dataset.q||'';apply();
 document.getElementById('ops').scrollIntoView();});});
apply();})();"""


@dataclass
class Entry:
    """One row of the page: an op under one variant on one backend at one precision, from one table."""
    table: str
    catalog: str
    op: str
    variant: str
    backend: str
    precision: str
    support: str = NOT_SAID
    detail: str = ""
    status: str = NOT_SAID
    rel_l2: float | None = None  # the worst of its cells
    max_norm: float | None = None
    tolerance: float | None = None
    floor: float | None = None  # the same-precision baseline's rel L2, where the table records it
    cells: int | None = None  # the cases and shape variants it stands for (a saved table's row: not said)
    # whose failure the status is where not the backend's: an exporter on the way to it ("torch.onnx at onnx export")
    charged: str = ""
    reason: str = ""  # why the row is not a pass, in the runtime's (or judge's) own words: its worst cell's reason
    sample: str = ""  # what the worst cell ran: its case (the ONNX test case, the OpInfo sample), shapes, attributes
    findings: list[dict] = field(default_factory=list)  # the findings/ reports on this op and backend: {id, title, url}

    @property
    def verdict(self) -> str:
        """The status as the page counts and lists it: a failure charged to an exporter is named as that exporter's,
        so it is never counted or listed as a failure of the backend the graph was meant for."""
        return f"{self.status} of {self.charged}" if self.charged else self.status


@dataclass
class Table:
    """One published input: its label, what made it and its rows."""
    path: Path
    label: str
    model: str
    versions: dict
    command: str | None
    entries: list[Entry] = field(default_factory=list)
    source: bool = True  # read from a saved table or report (which an upgrade's diff reads), not from page data

    @property
    def judged(self) -> bool:
        """Whether its rows hold check's verdicts (an ops report does; a plain --save table holds support alone)."""
        return any(e.status != NOT_SAID for e in self.entries)


def publish(tables: Sequence[str | Path], out_dir: str | Path, title: str | None = None,
            findings: str | Path | None = None, finding_url: str | None = None) -> dict[str, Path]:
    """Write DIR/index.html and DIR/SUPPORT.md from support tables or ops JSON reports; returns the written paths.
    `findings`: a folder of triaged reports (one subfolder each, with a finding.json: findings.py) that rows of
    their op and backend link to; `finding_url`: the link, '{folder}' standing for the report's subfolder (default:
    its REPORT.md relative to DIR). A file that is not one, or a folder that cannot be written, is a one-line
    UsageError."""
    if not tables:
        raise UsageError("publish needs at least one support table (fpdiff ops --save) or ops report (--json)")
    loaded = [t for p, label in zip(tables, _labels(tables)) for t in load_any(p, label)]
    if findings is not None:
        from fpdiff.report import findings as triage
        known = triage.load(findings, finding_url or triage.relative_url(findings, out_dir))
        for t in loaded:
            triage.link(t.entries, known)
    upgrades = [(a, b, store.diff_tables(a.path, b.path)) for a, b in _upgrades(loaded) if a.source and b.source]
    title = title or "fpdiff op support: " + ", ".join(dict.fromkeys(t.model for t in loaded))
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"cannot write the support page to {out_dir}: it is a file, not a folder")
    written = {"html": out / INDEX, "markdown": out / MARKDOWN, "data": out / DATA}
    try:
        out.mkdir(parents=True, exist_ok=True)
        written["html"].write_text(page(loaded, upgrades, title), encoding="utf-8")
        written["markdown"].write_text(markdown(loaded, upgrades, title), encoding="utf-8")
        written["data"].write_text(page_data(loaded, title), encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write the support page to {out_dir}: {e.strerror or e}") from None
    return written


def load_any(path: str | Path, label: str | None = None) -> list[Table]:
    """The tables of a published page's data (DATA), else the one table of a saved table or ops report."""
    from fpdiff.core.jsonfile import read
    if str(path).endswith(".json") and Path(path).is_file():
        try:
            raw = read(path, "a support table")
        except UsageError:
            raw = None
        if isinstance(raw, dict) and raw.get("kind") == PAGE_KIND:
            return from_page_data(Path(path), raw)
    return [load(path, label)]


def page_data(tables: list[Table], title: str) -> str:
    """The page's rows as JSON (DATA): what publish reads again to make the page anew, with other links (the docs
    site's), without the sweep's whole report."""
    out = {"kind": PAGE_KIND, "title": title, "tables": [
        {"label": t.label, "model": t.model, "versions": t.versions, "command": t.command,
         "entries": [{k: v for k, v in dataclasses.asdict(e).items() if k not in ("table", "findings")}
                     for e in t.entries]} for t in tables]}
    return json.dumps(out, separators=(",", ":"), default=str)


def from_page_data(path: Path, raw: dict) -> list[Table]:
    """The tables DATA holds (their findings linked again by the publish that reads them)."""
    names = {f.name for f in dataclasses.fields(Entry)}
    try:
        return [Table(path, str(t["label"]), str(t["model"]), dict(t.get("versions") or {}), t.get("command"),
                      [Entry(str(t["label"]), **{k: v for k, v in e.items() if k in names}) for e in t["entries"]],
                      source=False) for t in raw["tables"]]
    except (KeyError, TypeError) as e:
        raise UsageError(f"{path}: a table of the page's data cannot be read ({type(e).__name__}: {e})") from None


def load(path: str | Path, label: str | None = None) -> Table:
    """A table with its page rows: an ops report's cells (status and error per op and variant), else the saved
    table's rows (support per op; status and error where the row holds them)."""
    table = store.load_table(path)  # a file that is not a table: its one line
    raw = json.loads(Path(path).read_text())
    name = label or Path(path).stem
    t = Table(Path(path), name, str(raw.get("model") or "ops"), dict(table.get("versions") or {}),
              _command(raw))
    cells = raw.get("cells") if raw.get("kind") == "ops" else None
    t.entries = from_cells(name, cells) if isinstance(cells, list) else [from_row(name, r) for r in table["rows"]]
    t.entries.sort(key=lambda e: (e.backend, e.precision, e.catalog, e.op, e.variant))
    if isinstance(cells, list):
        t.entries += not_run(name, raw, t.entries)
    return t


def not_run(table: str, raw: dict, entries: list[Entry]) -> list[Entry]:
    """The ops of the sweep's selection (its catalogs, its --ops) that no cell judged, one row each saying why: the
    catalog left them out (its reason), or the --time budget ran out before their cases started. A reader must tell
    "not run" from "works" and from "fails": an absent op says neither."""
    from fpdiff.analysis.ops.case import matches
    from fpdiff.analysis.ops.catalog import op_names
    seen = {(e.catalog, e.op) for e in entries}
    why: dict[tuple[str, str], str] = {}
    selection = raw.get("selection") or {}
    if selection.get("variants_only"):  # the variants' own ops were the selection, not the catalogs': none is a gap
        return []
    for s in raw.get("skipped") or []:
        if isinstance(s, dict):
            why.setdefault((str(s.get("catalog")), str(s.get("op"))), f"left out: {s.get('reason') or 'no reason'}")
    for u in raw.get("unrun_cases") or []:
        if isinstance(u, dict):
            why.setdefault((str(u.get("catalog")), str(u.get("op"))), "not started: the --time budget ran out first")
    patterns = selection.get("patterns")
    late = ("not started: the --time budget ran out first" if raw.get("unrun") else
            "no case of it was judged")
    for catalog in selection.get("catalogs") or []:
        try:
            names = op_names(str(catalog))
        except (UsageError, ImportError, KeyError):
            continue  # a catalog this fpdiff does not have: its ops cannot be listed
        for op in names:  # an op the sweep's --ops did not select is not a gap of the table: not listed
            if patterns is None or matches(op, list(patterns)):
                why.setdefault((str(catalog), op), late)
    return [Entry(table, catalog, op, ALL_VARIANTS, ALL, ALL, status=NOT_RUN, reason=reason)
            for (catalog, op), reason in sorted(why.items()) if (catalog, op) not in seen]


def from_cells(table: str, cells: list[dict]) -> list[Entry]:
    """An ops report's cells as page rows, one per (catalog, op, variant, backend, precision): the worst status and
    error among its cases and shape variants, the most telling support state."""
    groups: dict[tuple, list[dict]] = {}
    for c in cells:
        key = tuple(str(c.get(k)) for k in ("catalog", "op", "variant", "backend", "precision"))
        groups.setdefault(key, []).append(c)
    return [_entry(table, key, group) for key, group in groups.items()]


def _entry(table: str, key: tuple, group: list[dict]) -> Entry:
    # the worst status; of equally bad ones the backend's own before one charged to an exporter (the row is the
    # backend's: its own failure says more of it)
    worst = max(group, key=lambda c: (_status_rank(str(c.get("status"))), not charged_to(c)))
    told = max(group, key=lambda c: _support_rank(c.get("support")))
    metrics = [c.get("metrics") or {} for c in group]
    return Entry(table, *key, support=told.get("support") or NOT_SAID, detail=told.get("support_detail") or "",
                 status=str(worst.get("status")), rel_l2=_worst(m.get("rel_l2") for m in metrics),
                 max_norm=_worst(m.get("max_norm") for m in metrics), tolerance=_tolerance(key[4]),
                 floor=_worst((c.get("baseline_metrics") or {}).get("rel_l2") for c in group), cells=len(group),
                 charged=charged_to(worst), reason=_reason(worst), sample=_sample(worst))


def _reason(cell: dict) -> str:
    """A cell's reason as a row says it: the stage it failed at and the words, cut at REASON_CHARS; '' for a pass."""
    if str(cell.get("status")) == str(Status.PASS):
        return ""
    words = _no_dirs(" ".join(str(cell.get("reason") or "").split()))
    words = words if len(words) <= REASON_CHARS else words[:REASON_CHARS - 3] + "..."
    stage = cell.get("stage")
    said = stage and (words.startswith(str(stage)) or f"at {stage}" in words[:80])
    return f"at {stage}: {words}" if stage and words and not said else words


def _no_dirs(text: str) -> str:
    """The words without the folders of the paths in them (a worker's temporary files: gone, and no reader's)."""
    return re.sub(r"(?<![\w.~])/(?:[\w.+-]+/)+(?=[\w.+-])", "", text)


def _sample(cell: dict) -> str:
    """The case a cell ran and what makes it that case (shapes, dtypes, attributes), its shape variant if not
    static: 'test_reduce_mean_keepdims: x float32[3, 2, 2], axes [1]'."""
    desc = " ".join(str(cell.get("description") or "").split())
    shape = cell.get("shape_variant")
    text = f"{cell.get('case')}: {desc}" if desc else str(cell.get("case") or "")
    return text + (f" ({shape} shapes)" if shape and shape != "static" else "")


def charged_to(cell: dict) -> str:
    """Who a cell's failure is charged to, with the stage, where it is not its backend's: the exporter that failed
    on the way to it (repro.culprit's rule: an error at torch.export or onnx export, whose bug report names the
    exporter); '' where it is the backend's own or no failure."""
    from types import SimpleNamespace

    from fpdiff.analysis.ops.repro import culprit
    fields = SimpleNamespace(**{k: cell.get(k) for k in ("status", "stage", "component", "backend")})
    who = culprit(fields)
    return f"{who} at {cell.get('stage')}" if who != cell.get("backend") else ""


def from_row(table: str, row: dict) -> Entry:
    """A saved table's row as a page row; fields a newer table may carry (status, rel_l2, max_norm, tolerance,
    floor, variant) are read where present."""
    return Entry(table, str(row.get("catalog")), str(row.get("op")), str(row.get("variant") or ALL_VARIANTS),
                 str(row.get("backend")), str(row.get("precision")), support=row.get("support") or NOT_SAID,
                 detail=str(row.get("detail") or ""), status=str(row.get("status") or NOT_SAID),
                 rel_l2=_number(row.get("rel_l2")), max_norm=_number(row.get("max_norm")),
                 tolerance=_number(row.get("tolerance")) or (_tolerance(str(row.get("precision")))
                                                              if row.get("status") else None),
                 floor=_number(row.get("floor")))


def _labels(paths: Sequence[str | Path]) -> list[str]:
    """Each table's name on the page: its file name, or the path as given where two share a name."""
    stems = [Path(p).stem for p in paths]
    return [s if stems.count(s) == 1 else str(p) for s, p in zip(stems, paths)]


def _command(raw: dict) -> str | None:
    """The command that made the table, where it is recorded."""
    got = raw.get("command") or raw.get("argv")
    return " ".join(map(str, got)) if isinstance(got, list) else (str(got) if got else None)


def _upgrades(tables: list[Table]) -> list[tuple[Table, Table]]:
    """Consecutive tables of the same sweep whose versions differ: the later one is the newer stack."""
    return [(a, b) for a, b in zip(tables, tables[1:]) if a.model == b.model and a.versions != b.versions]


def _status_rank(status: str) -> int:
    """A status's rank; one this fpdiff does not know counts as the worst, one not recorded as the best."""
    if status in (NOT_SAID, "None"):
        return -1
    try:
        return Status(status).rank
    except ValueError:
        return max(s.rank for s in Status)


def _support_rank(state: str | None) -> int:
    return STATES.index(state) + 1 if state in STATES else 0


def _number(x: object) -> float | None:
    """A metric as JSON holds it: a number, "inf" or "-inf" (json_float), or None."""
    try:
        return None if x is None or isinstance(x, bool) else float(x)
    except (TypeError, ValueError):
        return None


def _worst(values) -> float | None:
    nums = [v for v in map(_number, values) if v is not None]
    return max(nums, key=lambda v: math.inf if math.isnan(v) else v) if nums else None


def _tolerance(precision: str) -> float | None:
    """The precision's own tolerance, the one an op sweep judges by (a one-op case declares none of its own)."""
    from fpdiff.core.precision import PRECISIONS
    p = PRECISIONS.get(precision)
    return p.tolerance if p is not None else None


def backend_version(backend: str, versions: dict) -> str:
    """The versions of what a backend runs on, from the table's versions: the distributions of the modules it
    requires (its declaration), torch's for one requiring none, the same-named one for a backend this fpdiff does
    not know; '' where the table does not say."""
    from fpdiff.core.versions import CORE
    needs = _requires(backend)
    if needs is None:
        keys = [k for k in versions if _tokens(k) == _tokens(backend)]
    else:
        keys = [k for m in needs for k in _keys_for(m, versions)] if needs else [CORE[0]]
    return ", ".join(f"{k} {versions[k]}" for k in dict.fromkeys(keys) if versions.get(k))


@functools.cache
def _registry():
    from fpdiff.backends import registry
    return registry()


def _requires(backend: str) -> tuple[str, ...] | None:
    """The modules the backend declares it requires; None for a backend this fpdiff does not know."""
    try:
        return tuple(_registry().cls(backend).requires)
    except UsageError:
        return None


def _keys_for(module: str, versions: dict) -> list[str]:
    """The versions' keys naming a module's distribution ('iree.compiler': iree-base-compiler), else its top name's
    ('onnx.reference': onnx)."""
    want = _tokens(module)
    top = {module.split(".")[0].lower()}
    return [k for k in versions if want <= _tokens(k)] or [k for k in versions if _tokens(k) == top]


def _tokens(name: str) -> set[str]:
    return set(name.lower().replace("-", ".").replace("_", ".").split("."))


# ---- counts -------------------------------------------------------------------------------------------------------

def judged(t: Table) -> list[Entry]:
    """The rows a backend ran (the not-run rows stand apart: no backend or precision holds them)."""
    return [e for e in t.entries if e.status != NOT_RUN]


def matrix(t: Table) -> dict[tuple[str, str], Counter]:
    """(backend, precision) -> rows per status and per support state (a Counter over both words)."""
    out: dict[tuple[str, str], Counter] = {}
    for e in judged(t):
        n = out.setdefault((e.backend, e.precision), Counter())
        n[e.verdict] += 1
        n[e.support] += 1
    return out


def _columns(t: Table) -> tuple[list[str], list[str]]:
    """The statuses and the support states the table has, in their own order (not recorded last)."""
    statuses = {e.verdict for e in judged(t)}
    states = {e.support for e in judged(t)}
    known = [str(s) for s in CELL_STATUSES]
    return ([s for s in known if s in statuses] + sorted(statuses - set(known) - {NOT_SAID})
            + ([NOT_SAID] if NOT_SAID in statuses else []),
            [s for s in STATES if s in states] + ([NOT_SAID] if NOT_SAID in states else []))


def gaps(t: Table, backend: str) -> dict[str, list[Entry]]:
    """A backend's rows that are not native or do not pass, by 'precision state' (support or status; an exporter's
    failure on the way to it under its own words, apart from the backend's)."""
    out: dict[str, list[Entry]] = {}
    for e in judged(t):
        if e.backend != backend:
            continue
        if e.support != "native":
            out.setdefault(f"{e.precision} {e.support if e.support != NOT_SAID else 'support not said'}", []).append(e)
        if e.status not in (str(Status.PASS), NOT_SAID):
            out.setdefault(f"{e.precision} {e.verdict}", []).append(e)
    return out


# ---- HTML ---------------------------------------------------------------------------------------------------------

def _e(x: object) -> str:
    return html.escape(str(x), quote=True)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1e}"


def _status_colour(status: str) -> str:
    """A status's colour; a failure charged to an exporter ("error of torch.onnx at onnx export") has its status's."""
    try:
        return Status(status.split(" of ")[0]).colour
    except ValueError:
        return "#fff"


EMBED = "fpdiff-support"  # the class an embedded page's CSS is scoped under (a documentation site's own page)
# the page's own rules that an embedding site keeps for itself (its fonts, margins, headings, table borders)
SITE_OWNS = ("body", "h1", "h2", "table", "td,th", "th")


def embed(tables: list[Table], title: str) -> str:
    """The page's body for another site's page (the documentation's): no html, head or title, its CSS scoped under
    EMBED, the rows table left out of that site's own search index (the page's search box filters it)."""
    rules = [r for r in PAGE_STYLE.replace("\n", "").split("}") if "{" in r]
    style = "".join(f"{','.join(f'.{EMBED} {x.strip()}' for x in sel.split(','))}{{{body}}}"
                    for sel, body in (r.split("{", 1) for r in rules) if sel.strip() not in SITE_OWNS)
    inner = _body(tables, []).replace("<table id='ops'>", "<table id='ops' data-search-exclude>")
    return f"<div class='{EMBED}'><style>{style}</style>{inner}<script>{SCRIPT}</script></div>"


def page(tables: list[Table], upgrades: list[tuple[Table, Table, dict]], title: str) -> str:
    """The whole page: stacks and versions, the summary matrices, upgrades, then every row, searchable."""
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{PAGE_STYLE}</style></head><body><h1>{_e(title)}</h1>{_body(tables, upgrades)}"
            f"<script>{SCRIPT}</script></body></html>")


def _body(tables: list[Table], upgrades: list[tuple[Table, Table, dict]]) -> str:
    """What the page says below its title."""
    rows = sum(len(t.entries) for t in tables)
    intro = (f"<p>{rows} rows (op x variant x backend x precision) from {len(tables)} "
             f"{'table' if len(tables) == 1 else 'tables'}. Support is the runtime's own word: "
             "<b>native</b> (a kernel at the dtype asked), <b>other-dtype</b> (it computed in another dtype), "
             "<b>not-implemented</b> (it refused). Status and error are check's verdict against float64; a row "
             "stands for its worst case. A failure of the exporter on the way to a backend (<b>error of torch.onnx at "
             "onnx export</b>: its graph raised, or computes another function than the torch program) is the "
             "exporter's, counted apart from the backend's own. Click a count to list its rows. <b>not run</b>: no "
             "case of the op was judged (the row says why); it says nothing of whether the op works.</p>")
    legend = "<p class='legend'>" + "".join(f"<span style='background:{s.colour}'>{_e(s)}</span>"
                                            for s in CELL_STATUSES) + "</p>"
    body = [intro, legend, *_machines_html(tables), _stacks_html(tables)]
    body += [_matrix_html(t, len(tables) > 1) for t in tables]
    body += [_upgrade_html(a, b, d) for a, b, d in upgrades]
    body += [_by_op_html(t, len(tables) > 1) for t in tables]
    body.append(_rows_html(tables))
    return "".join(body)


def _stacks_html(tables: list[Table]) -> str:
    """Each table's sweep, command and versions side by side."""
    keys = list(dict.fromkeys(k for t in tables for k in t.versions))
    head = "".join(f"<th>{_e(t.label)}</th>" for t in tables)
    rows = [f"<tr><td>sweep</td>{''.join(f'<td>{_e(t.model)}</td>' for t in tables)}</tr>"]
    if any(t.command for t in tables):
        rows.append("<tr><td>command</td>" + "".join(f"<td><code>{_e(t.command or '-')}</code></td>"
                                                     for t in tables) + "</tr>")
    rows += [f"<tr><td>{_e(k)}</td>" + "".join(f"<td>{_e(t.versions.get(k) or '-')}</td>" for t in tables) + "</tr>"
             for k in keys]
    plain = [t.label for t in tables if not t.judged]
    note = (f"<p class='muted'>{_e(', '.join(plain))}: {_e(SUPPORT_ONLY)}</p>" if plain else "")
    return f"<h2>Stack</h2><table><tr><th></th>{head}</tr>{''.join(rows)}</table>{note}"


def _matrix_html(t: Table, named: bool) -> str:
    """Rows per backend (its version) x precision, counted by status and by support state."""
    statuses, states = _columns(t)
    head = "".join(f"<th>{_e(s if s != NOT_SAID else 'status not recorded')}</th>" for s in statuses)
    head += "".join(f"<th>{_e(s if s != NOT_SAID else 'support not said')}</th>" for s in states)
    body = []
    for (b, p), n in sorted(matrix(t).items()):
        where = f"data-table='{_e(t.label)}' data-backend='{_e(b)}' data-precision='{_e(p)}'"
        tds = "".join(_count_td(n[s], _status_colour(s), f"{where} data-status='{_e(s)}'") for s in statuses)
        tds += "".join(_count_td(n[s], SUPPORT_COLOUR.get(s, "#fff"), f"{where} data-support='{_e(s)}'")
                       for s in states)
        version = backend_version(b, t.versions)
        body.append(f"<tr><th>{_e(b)}<br><span class='muted'>{_e(version)}</span></th><td>{_e(p)}</td>{tds}</tr>")
    name = f": {_e(t.label)}" if named else ""
    return (f"<h2>Summary{name}</h2><table><tr><th>backend</th><th>precision</th>{head}</tr>{''.join(body)}"
            "</table>")


def _count_td(n: int, colour: str, data: str) -> str:
    if not n:
        return "<td class='cell'>0</td>"
    return f"<td class='cell click' style='background:{colour}' {data}>{n}</td>"


def _upgrade_html(a: Table, b: Table, d: dict) -> str:
    """What the newer stack gained and lost (store.diff_tables), with the versions that moved."""
    moves = Counter(c["kind"] for c in d["changed"])
    said = ", ".join(f"{n} {k}" for k, n in sorted(moves.items())) or "no row changed its support"
    versions = "".join(f"<tr><td>{_e(k)}</td><td>{_e(x or '-')}</td><td>{_e(y or '-')}</td></tr>"
                       for k, (x, y) in d["versions"].items())
    rows = "".join(f"<tr><td style='background:{MOVE_COLOUR.get(c['kind'], '#fff')}'>{_e(c['kind'])}</td>"
                   f"<td>{_e(c['row'])}</td><td>{_e(c['before'] or '-')}</td><td>{_e(c['after'] or '-')}</td>"
                   f"<td class='detail'>{_e(c.get('detail') or '')}</td></tr>" for c in d["changed"])
    changed = ("<table><tr><th>move</th><th>catalog/op/backend/precision</th><th>before</th><th>after</th>"
               f"<th>detail</th></tr>{rows}</table>") if rows else ""
    return (f"<h2>Upgrade: {_e(a.label)} &rarr; {_e(b.label)}</h2><p>Support {_e(said)}.</p>"
            "<table><tr><th>component</th><th>before</th><th>after</th></tr>"
            f"{versions}</table>{changed}")


def _select(facet: str, label: str, values: list[str]) -> str:
    options = "".join(f"<option value='{_e(v)}'>{_e(v)}</option>" for v in values)
    return (f"<select class='filter' data-facet='{facet}' aria-label='{_e(label)}'>"
            f"<option value=''>{_e(label)}: all</option>{options}</select>")


def _rows_html(tables: list[Table]) -> str:
    """Every row, with the search box and the filters over them."""
    entries = [e for t in tables for e in t.entries]
    versions = {(t.label, b): backend_version(b, t.versions) if b != ALL else "" for t in tables
                for b in {e.backend for e in t.entries}}
    facets = [("backend", "backend"), ("precision", "precision"), ("status", "status"), ("support", "support")]
    if len(tables) > 1:
        facets.insert(0, ("table", "table"))
    selects = "".join(_select(f, label, sorted({_facet(e, f) for e in entries})) for f, label in facets)
    controls = ("<div class='controls'><input id='q' type='search' placeholder='search op, backend, precision, "
                f"status...' aria-label='search'>{selects}<span id='shown' class='muted'></span></div>")
    table_head = "<th>table</th>" if len(tables) > 1 else ""
    floors = any(e.floor is not None for e in entries)
    head = (f"<tr>{table_head}<th>backend</th><th>precision</th><th>catalog</th><th>op</th><th>variant</th>"
            "<th>support</th><th>status</th><th>rel L2 (worst)</th><th>worst element</th><th>tolerance</th>"
            f"{'<th>floor (baseline rel L2)</th>' if floors else ''}<th>cases</th><th>sample (the worst case)</th>"
            "<th>why: the runtime's words</th><th>finding</th></tr>")
    body = "".join(_row_html(e, versions[(e.table, e.backend)], len(tables) > 1, floors) for e in entries)
    return f"<h2>Ops</h2>{controls}<table id='ops'><thead>{head}</thead><tbody>{body}</tbody></table>"


def _facet(e: Entry, facet: str) -> str:
    """A row's value under a filter: its status as the page counts it (an exporter's failure named so)."""
    return e.verdict if facet == "status" else getattr(e, facet)


def _row_html(e: Entry, version: str, named: bool, floors: bool) -> str:
    words = " ".join((e.table, e.catalog, e.op, e.variant, e.backend, version, e.precision, e.support, e.verdict,
                      e.sample, e.reason, *(f["id"] for f in e.findings)))
    data = (f"data-table='{_e(e.table)}' data-backend='{_e(e.backend)}' data-precision='{_e(e.precision)}' "
            f"data-status='{_e(e.verdict)}' data-support='{_e(e.support)}' data-text='{_e(words.lower())}'")
    table = f"<td>{_e(e.table)}</td>" if named else ""
    return (f"<tr {data}>{table}<td>{_e(e.backend)}<br><span class='muted'>{_e(version)}</span></td>"
            f"<td>{_e(e.precision)}</td><td>{_e(e.catalog)}</td><td>{_e(e.op)}</td><td>{_e(e.variant)}</td>"
            f"<td style='background:{SUPPORT_COLOUR.get(e.support, '#fff')}'>{_e(e.support)}</td>"
            f"<td style='background:{_status_colour(e.status)}'>{_e(e.verdict)}</td>"
            f"<td class='num'>{_fmt(e.rel_l2)}</td><td class='num'>{_fmt(e.max_norm)}</td>"
            f"<td class='num'>{_fmt(e.tolerance)}</td>{f'<td class=num>{_fmt(e.floor)}</td>' if floors else ''}"
            f"<td class='num'>{e.cells or '-'}</td><td class='detail'>{_e(e.sample)}</td>"
            f"<td class='detail'>{_why_html(e)}</td><td>{_findings_html(e)}</td></tr>")


def _why_html(e: Entry) -> str:
    """The reason a row is not a pass, then the runtime's word on its support (kernels, the dtype it ran)."""
    parts = [_e(e.reason)] if e.reason else []
    if e.detail and e.detail != e.reason:
        parts.append(f"<span class='muted'>{_e(e.detail)}</span>")
    return "<br>".join(parts)


def _findings_html(e: Entry) -> str:
    """Links to the reports on the row's op and backend; 'not triaged' for a failing row that has none."""
    if e.findings:
        return _links(e.findings)
    if not untriaged(e):
        return ""
    return f"<span class='muted'>not triaged; again:</span> <code>{_e(again(e))}</code>"


def _links(found) -> str:
    """Links to findings, each titled by its report."""
    return " ".join(f"<a class='finding-link' href='{_e(f['url'])}' title='{_e(f['title'])}'>{_e(f['id'])}</a>"
                    for f in found)


def again(e: Entry) -> str:
    """The sweep of this one row: the command that runs it again (with its repro bundle, the sweep's default)."""
    variant = f" --variants {e.variant}" if e.variant != ALL_VARIANTS else ""
    return (f"fpdiff ops --catalog {e.catalog} --ops '{e.op}' --backends {e.backend} --precisions {e.precision}"
            f"{variant}")


FAILING_WORDS = {str(x) for x in FAILING}


def untriaged(e: Entry) -> bool:
    """A failing row (mismatch, error, crash, timeout) that no finding covers."""
    return not e.findings and e.status in FAILING_WORDS


def _machines_html(tables: list[Table]) -> list[str]:
    """The CPU each table was measured on, first: a narrow format's numbers can depend on its instruction sets."""
    cpus = list(dict.fromkeys(str(t.versions.get("cpu")) for t in tables if t.versions.get("cpu")))
    if not cpus:
        return ["<p class='machine'><b>Measured on</b>: a CPU the table does not record. OpenVINO computes bf16 and "
                "fp16 in f32 without AVX512-BF16/AMX or AVX512-FP16/AMX-FP16, so its rows hold for that CPU kind only."
                "</p>"]
    return [f"<p class='machine'><b>Measured on</b>: {_e(c)}. OpenVINO's bf16 and fp16 rows hold for a CPU with "
            "these instruction sets only: without AVX512-BF16/AMX it computes a bf16 hint in f32, without "
            "AVX512-FP16/AMX-FP16 an f16 one.</p>" for c in cpus]


STATUS_SHORT = {"pass": "ok", "precision-loss": "loss", "mismatch": "MISMATCH", "unsupported": "unsup",
                "error": "error", "unjudged": "unjudged", "crash": "crash", "timeout": "timeout"}


def _by_op_html(t: Table, named: bool) -> str:
    """One row per op: its status on every backend and precision (its variants' worst), its findings; a not-run op
    says why across the row. Click a cell to list its rows below."""
    columns = sorted({(e.backend, e.precision) for e in judged(t)})
    worst: dict[tuple, Entry] = {}
    found: dict[tuple, dict] = {}
    for e in t.entries:
        key = (e.catalog, e.op)
        cell = worst.get((*key, e.backend, e.precision))
        if cell is None or (_status_rank(e.status), e.rel_l2 or 0) > (_status_rank(cell.status), cell.rel_l2 or 0):
            worst[(*key, e.backend, e.precision)] = e
        for f in e.findings:
            found.setdefault(key, {})[f["id"]] = f
    ops = sorted({(e.catalog, e.op) for e in t.entries})
    head = "".join(f"<th>{_e(b)}<br>{_e(p)}</th>" for b, p in columns)
    rows = []
    for catalog, op in ops:
        gone = worst.get((catalog, op, ALL, ALL))
        if gone is not None:
            tds = f"<td colspan='{len(columns)}' class='detail'>not run: {_e(gone.reason)}</td>"
        else:
            tds = "".join(_op_cell(worst.get((catalog, op, b, p)), t.label) for b, p in columns)
        links = _links(found.get((catalog, op), {}).values())
        rows.append(f"<tr data-op='{_e(op.lower())}'><td>{_e(catalog)}</td><td>{_e(op)}</td>{tds}<td>{links}</td></tr>")
    name = f": {_e(t.label)}" if named else ""
    return (f"<h2>By op{name}</h2><p class='muted'>An op's status on each backend and precision, the worst of its "
            "variants and cases; hover for its error and reason, click to list its rows.</p>"
            f"<table class='byop'><thead><tr><th>catalog</th><th>op</th>{head}<th>findings</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _op_cell(e: Entry | None, table: str) -> str:
    if e is None:
        return "<td class='cell muted'>-</td>"
    tip = " ".join(x for x in (e.verdict, f"rel L2 {_fmt(e.rel_l2)}" if e.rel_l2 is not None else "", e.reason) if x)
    data = (f"data-table='{_e(table)}' data-backend='{_e(e.backend)}' data-precision='{_e(e.precision)}' "
            f"data-q='{_e(e.op.lower())}'")
    return (f"<td class='cell click' style='background:{_status_colour(e.status)}' title='{_e(tip)}' {data}>"
            f"{_e(STATUS_SHORT.get(e.status, e.status))}{'*' if e.charged else ''}</td>")


# ---- Markdown -----------------------------------------------------------------------------------------------------

def _md(x: object) -> str:
    """Text for a Markdown table cell or line: no pipe, bracket or angle bracket read as markup."""
    text = " ".join(str(x).split())
    for ch in "\\|<>[]*_`":
        text = text.replace(ch, "\\" + ch)
    return text


def markdown(tables: list[Table], upgrades: list[tuple[Table, Table, dict]], title: str) -> str:
    """SUPPORT.md: per table its stack, command and count matrix, then per backend its gaps; then the upgrades."""
    out = [f"# {_md(title)}", "", "Rows are op x variant x backend x precision; support is the runtime's own word, "
           "status check's verdict against float64 (at a quantized format, quant's verdict against the quantized "
           "graph's exact float64 emulation and the float model's float64; a row stands for its worst case); a "
           "failure of the exporter on the "
           "way to a backend (`error of torch.onnx at onnx export`) is the exporter's, counted apart from the "
           f"backend's own. The page: [{INDEX}]({INDEX}).", ""]
    for t in tables:
        out += _table_md(t)
    for a, b, d in upgrades:
        out += _upgrade_md(a, b, d)
    return "\n".join(out).rstrip() + "\n"


def _table_md(t: Table) -> list[str]:
    out = [f"## {_md(t.label)} ({_md(t.model)})", "",
           *([f"Made by: {_code(t.command)}", ""] if t.command else []),
           *([f"Status and error: none ({SUPPORT_ONLY}).", ""] if not t.judged else []),
           "Versions: " + (", ".join(f"{_md(k)} {_md(v)}" for k, v in t.versions.items() if v) or "not recorded"),
           "", *coverage_md(t), "", *matrix_md(t), ""]
    variants = Counter((e.catalog, e.op, e.backend, e.precision) for e in t.entries)
    for backend in sorted({e.backend for e in judged(t)}):
        found = gaps(t, backend)
        version = backend_version(backend, t.versions)
        out.append(f"### {_md(backend)}" + (f" ({_md(version)})" if version else ""))
        out.append("")
        out += [f"- {_md(k)}: " + compact(v, variants) for k, v in sorted(found.items())]
        if not found:
            out.append("- every row native and passing")
        out.append("")
    return out + untriaged_md(t)


def untriaged_md(t: Table) -> list[str]:
    """The failing rows no finding covers, each with its reason's start and the command that runs it again."""
    rows = [e for e in judged(t) if untriaged(e)]
    if not rows:
        return []
    out = [f"### Not triaged yet ({len(rows)} rows)", ""]
    for e in rows:
        why = e.reason if len(e.reason) <= 160 else e.reason[:157] + "..."
        out.append(f"- {_md(e.backend)} {_md(e.precision)} {_code(e.op)} ({_md(e.variant)}): {_md(e.verdict)}: "
                   f"{_md(why)} Again: {_code(again(e))}")
    return [*out, ""]


def coverage_md(t: Table) -> list[str]:
    """What the table says and does not: the CPU, the ops judged and not run (why), the failing rows triaged."""
    cpu = t.versions.get("cpu")
    out = [f"Measured on: {_md(cpu)}." if cpu else "Measured on: a CPU the table does not record."]
    ran = {(e.catalog, e.op) for e in judged(t)}
    gone = Counter(e.reason.split(":")[0] for e in t.entries if e.status == NOT_RUN)
    if gone:
        out.append(f"Ops judged: {len(ran)}; not run: {sum(gone.values())} ("
                   + ", ".join(f"{n} {_md(why)}" for why, n in gone.most_common()) + "; each a row on the page).")
    failing = [e for e in judged(t) if e.status in FAILING_WORDS]
    if failing:
        bad = sum(untriaged(e) for e in failing)
        out.append(f"Failing rows (mismatch, error, crash, timeout): {len(failing)}; {len(failing) - bad} link a "
                   f"finding, {bad} not triaged yet.")
    return "\n\n".join(out).split("\n")


def _code(text: str) -> str:
    """A name as inline code (nothing in it read as markup), or escaped where it holds a backtick."""
    return _md(text) if "`" in text else f"`{' '.join(text.split())}`"


def compact(rows: list[Entry], variants: Counter) -> str:
    """Ops by name, each once: an op all of whose variants (`variants`: rows per catalog, op, backend, precision)
    are in `rows` bare, the others with the variants that are: `Erf [tiny]`."""
    by_op: dict[tuple, list[str]] = {}
    ids: dict[tuple, dict[str, None]] = {}
    for e in rows:
        by_op.setdefault((e.catalog, e.op, e.backend, e.precision), []).append(e.variant)
        ids.setdefault((e.catalog, e.op, e.backend, e.precision), {}).update(dict.fromkeys(f["id"] for f in e.findings))
    names = [_code(key[1] if len(found) >= variants[key] else f"{key[1]} [{', '.join(found)}]")
             + (f" ({', '.join(ids[key])})" if ids[key] else "") for key, found in by_op.items()]
    return f"{len(by_op)} {'op' if len(by_op) == 1 else 'ops'}: " + ", ".join(names)


def matrix_md(t: Table) -> list[str]:
    """The count matrix: a row per backend x precision, a column per status and per support state."""
    statuses, states = _columns(t)
    names = [s if s != NOT_SAID else "status not recorded" for s in statuses]
    names += [s if s != NOT_SAID else "support not said" for s in states]
    lines = ["| backend | precision | " + " | ".join(names) + " |", "|---|---|" + "---:|" * len(names)]
    for (b, p), n in sorted(matrix(t).items()):
        lines.append(f"| {_md(b)} | {_md(p)} | " + " | ".join(str(n[s]) for s in [*statuses, *states]) + " |")
    return lines


def _upgrade_md(a: Table, b: Table, d: dict) -> list[str]:
    moves = Counter(c["kind"] for c in d["changed"])
    said = ", ".join(f"{n} {k}" for k, n in sorted(moves.items())) or "no row changed its support"
    lines = store.table_diff_lines(d)
    fence = _fence(lines)
    return [f"## Upgrade: {_md(a.label)} -> {_md(b.label)}", "", f"Support: {said}.", "", f"{fence}text", *lines,
            fence, ""]


def _fence(lines: list[str]) -> str:
    """A code fence longer than any run of backticks in the lines it holds (a runtime's words may have some)."""
    longest = max((len(run) for ln in lines for run in re.findall(r"`+", ln)), default=0)
    return "`" * max(3, longest + 1)
