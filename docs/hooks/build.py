"""What the documentation build makes itself, so the site shows this code and this install, not a copy made once:
the op support page (from support/support.json, the published sweep: `make support` makes it again) and the
quantized ones (support/quantized and support/quantized-torch: `make support-quantized`), a page for
each triaged report in findings/ (its REPORT.md, ANALYSIS.md and minimal repro.py) that the support page's rows
link to, and the hero image: a live `fpdiff check example:tinycnn`, its terminal grid drawn as SVG text."""
from __future__ import annotations

import functools
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "support" / "support.json"
QUANTIZED = ROOT / "support" / "quantized" / "support.json"
FINDINGS = ROOT / "findings"
SUPPORT_PAGE, FINDINGS_PAGE, HERO = "support.md", "findings/index.md", "img/hero.svg"
QUANTIZED_PAGE = "quantized-support.md"
QUANTIZED_TORCH = ROOT / "support" / "quantized-torch" / "support.json"
QUANTIZED_TORCH_PAGE = "quantized-torch-support.md"
# each support page: its published data, its title and words, and the make target that makes it again
PAGES = {
    SUPPORT_PAGE: (SUPPORT, "Op support", "support", "Which ops each backend computes at each precision on this "
                   "stack, in the runtime's own word, and how far from float64"),
    QUANTIZED_PAGE: (QUANTIZED, "Quantized op support", "support/quantized", "Which of ONNX's quantized ops (and "
                     "which ONNX ops wrapped in QDQ by ONNX Runtime's quantizer) each backend runs at each quantized "
                     "format, in integer kernels or dequantized to float, and whether it computes what the graph's "
                     "exact float64 emulation computes, in quantization steps"),
    QUANTIZED_TORCH_PAGE: (QUANTIZED_TORCH, "Torch ops each backend quantizes", "support/quantized-torch",
                           "Which torch ops each PT2E backend's own quantizer quantizes at int8 (XNNPACKQuantizer on "
                           "ExecuTorch, X86InductorQuantizer on inductor, litert-torch's PT2EQuantizer on LiteRT), "
                           "whether the backend then runs them in integer kernels, and whether it computes what its "
                           "own quantized program's exact float64 emulation computes"),
}
PLACEHOLDER = "<!-- fpdiff-support-page -->"
HERO_MODEL = "example:tinycnn"
HERO_WIDTH = 112  # characters: the grid and its findings on one line each where they fit


def on_files(files: Files, config) -> Files:
    """The generated pages and the hero image, each replacing a file of the same path if there is one."""
    published.cache_clear()  # a build of `make docs` after support/ changed reads it anew
    pages = {uri: support_markdown(uri) for uri in PAGES if PAGES[uri][0].is_file()}
    pages[FINDINGS_PAGE] = findings_index()
    pages.update({f"findings/{d.name}.md": finding_page(d) for d in finding_folders()})
    pages[HERO] = hero_svg()
    for uri, content in pages.items():
        old = files.get_file_from_path(uri)
        if old is not None:
            files.remove(old)
        files.append(File.generated(config, uri, content=content))
    return files


def on_page_content(html: str, page, config, files) -> str:
    """A support page's tables, as fpdiff publish draws them, with its rows linking the findings pages."""
    if page.file.src_uri not in PAGES:
        return html
    from fpdiff.report import findings, support_page
    tables = published(page.file.src_uri)
    for t in tables:
        findings.link(t.entries, findings.load(FINDINGS, "../findings/{folder}/"))
    wide = "<style>.md-grid{max-width:none}</style>"  # the tables want the window's width, not a text column's
    return html.replace(PLACEHOLDER, wide + support_page.embed(tables, ""))


@functools.cache
def published(uri: str = SUPPORT_PAGE) -> list:
    """A page's published tables (its support.json), read once a build."""
    from fpdiff.report import support_page
    return support_page.load_any(PAGES[uri][0])


def support_markdown(uri: str = SUPPORT_PAGE) -> str:
    """A support page's words; its tables come in at PLACEHOLDER (on_page_content)."""
    _, title, folder, what = PAGES[uri]
    tables = published(uri)
    made = next((t.command for t in tables if t.command), None)
    target = "support" if folder == "support" else "support-quantized"
    lines = ["---", "hide:", "  - toc", "---", "", f"# {title}", "",
             f"{what}: the published op sweep (`fpdiff ops`, then `fpdiff publish`; see "
             "[Published support tables](support-tables.md)). Search the rows below by op, backend, precision, "
             "status, sample or reason; a link in a row's *finding* column opens the triaged report "
             "([all findings](findings/index.md)). The same page stands alone in the repository as "
             f"`{folder}/index.html`, with `{folder}/SUPPORT.md` beside it.", ""]
    if made:
        lines += [f"Made with `{made}`; `make {target}` makes it again from the code of the day.", ""]
    return "\n".join(lines + [PLACEHOLDER, ""])


def finding_folders() -> list[Path]:
    return sorted(d for d in FINDINGS.iterdir() if d.is_dir() and (d / "REPORT.md").is_file())


def _demoted(text: str) -> str:
    """A document's headings one level down, to sit under the page's title."""
    return re.sub(r"^(#{1,5}) ", r"#\1 ", text, flags=re.M)


def finding_page(folder: Path) -> str:
    """A report's page: REPORT.md, then ANALYSIS.md and the minimal repro.py where the folder has them."""
    out = [(folder / "REPORT.md").read_text(encoding="utf-8").rstrip(), ""]
    if (folder / "ANALYSIS.md").is_file():
        out += ["## Analysis", "", _demoted((folder / "ANALYSIS.md").read_text(encoding="utf-8")).rstrip(), ""]
    if (folder / "repro.py").is_file():
        out += ["## repro.py", "", f"`findings/{folder.name}/repro.py` (exit 1 while the bug is there):", "",
                "```python", (folder / "repro.py").read_text(encoding="utf-8").rstrip(), "```", ""]
    out += [f"The folder, with the exact graph or program as the backend got it: `findings/{folder.name}/`.", ""]
    return "\n".join(out)


def findings_index() -> str:
    """findings/README.md with each report's id a link to its page."""
    text = (FINDINGS / "README.md").read_text(encoding="utf-8")
    pages = {"-".join(d.name.split("-")[:2]): d.name for d in finding_folders()}
    text = re.sub(r"^\| (\w+-\d+)(?= )", lambda m: f"| [{m.group(1)}]({pages[m.group(1)]}.md)"
                  if m.group(1) in pages else m.group(0), text, flags=re.M)
    return text


def hero_svg() -> str:
    """`fpdiff check example:tinycnn` run now, its terminal report recorded as SVG, under the versions and CPU."""
    import io

    from rich.console import Console

    import fpdiff
    from fpdiff.analyses.check import text
    result = fpdiff.check(HERO_MODEL, progress=False, repro_dir=None)
    console = Console(record=True, width=HERO_WIDTH, file=io.StringIO(), force_terminal=True)
    console.print(f"$ fpdiff check {HERO_MODEL}", style="bold")
    text.render(result, console)
    v = result.versions
    console.print(f"torch {v.get('torch')}, onnxruntime {v.get('onnxruntime')}, iree {v.get('iree-base-compiler')}; "
                  f"{v.get('cpu')}", style="dim", highlight=False)
    return console.export_svg(title=f"fpdiff check {HERO_MODEL}")
