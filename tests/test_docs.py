"""The documentation cannot rot: the site builds with `mkdocs build --strict` and no warning, every command and Python
example on its pages runs as written, and every option a page writes after `fpdiff SUBCOMMAND` exists.

What runs: fenced ```bash / ```shell / ```sh blocks whose commands start with `fpdiff ` or `python` (each command
in turn), ```console blocks (the `$ ` lines are the commands; the lines under one are its output, abridged: each
output line's pieces between `...` must appear in order in what the command printed, whitespace aside), and
```python blocks (the block as a script; a block that is one included file runs as that file, from where it lives).
`--8<-- "path"` lines (pymdownx.snippets, the repo root as base) are read as the file they include. Each block runs
in a fresh temporary directory holding a link to the repo's `tests/` and a copy of `docs/examples/`, with this
interpreter's bin directory first on PATH, a fresh run history (so run ids start at 1) and the session's compile
cache; every command has a timeout.

Markers, HTML comments on the lines right before a fence (the site does not show them):
- `<!-- docs-test: skip (REASON) -->`: a block that cannot run on a CPU-only Linux machine without network (a GPU, a
  Mac, a remote host, another interpreter, a user's own file named as a placeholder): a visible skip with REASON.
- `<!-- docs-test: exit N -->`: the exit code every command of the block must give (default 0); `exit N M ...`:
  one per command, in order.
A block that runs backends is marked slow (`make test-fast` leaves it out); the build and the option check are not.
The option check reads README.md too, and the README must link every page by its path (docs/NAME.md).
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
BIN = Path(sys.executable).parent
TIMEOUT = 300  # seconds per command; the slowest (a Core ML conversion) takes about 20 s on a 2-core machine

RUN_LANGS = {"bash", "shell", "sh", "console", "python"}
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
SNIPPET = re.compile(r'^\s*--8<--\s+"(?P<path>[^"]+)"\s*$')
RUNS = re.compile(r"^(fpdiff|python3?)(\s|$)")
# commands that run no backend, no model: quick enough for `make test-fast`
FAST = re.compile(r"^fpdiff (--version|--help|examples|backends|cache|history|diff|report|rejudge|ops --list-variants)"
                  r"|^fpdiff \w+ --help$")
# the fpdiff subcommands a page may name that this install does not register: the toy analysis of "Add an analysis",
# registered by its own package
NOT_HERE = {"toy"}


@dataclass
class Command:
    text: str
    output: list[str] = field(default_factory=list)  # console blocks: the abridged output shown under it


@dataclass
class Block:
    page: str
    line: int
    lang: str
    text: str
    markers: list[str]
    file: str | None = None  # a Python block that is one included file: it runs as that file, from where it lives

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def skip(self) -> str | None:
        for m in self.markers:
            found = re.fullmatch(r"skip\s*\((.+)\)", m)
            if found:
                return found.group(1)
        return None

    @property
    def exits(self) -> list[int]:
        for m in self.markers:
            found = re.fullmatch(r"exit((?:\s+\d+)+)", m)
            if found:
                return [int(n) for n in found.group(1).split()]
        return [0]

    def exit_for(self, i: int) -> int:
        codes = self.exits
        return codes[0] if len(codes) == 1 else codes[i]

    @property
    def commands(self) -> list[Command]:
        if self.lang == "python":
            return [Command(f"python {self.file or _PY_FILE}")]
        out: list[Command] = []
        lines = self.text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i].rstrip()
            i += 1
            if self.lang == "console":
                if not line.startswith("$ "):
                    if line.strip() and out:
                        out[-1].output.append(line)
                    continue
                line = line[2:]
            elif not line.strip() or line.lstrip().startswith("#"):
                continue
            while line.endswith("\\") and i < len(lines):  # a command continued on the next line
                line = line[:-1].rstrip() + " " + lines[i].strip()
                i += 1
            out.append(Command(line.strip()))
        return out

    @property
    def runs(self) -> bool:
        """A block the test executes: Python, or commands of which one starts with fpdiff or python."""
        return self.lang == "python" or any(RUNS.match(c.text) for c in self.commands)

    @property
    def fast(self) -> bool:
        return self.lang != "python" and all(FAST.match(c.text) for c in self.commands)


_PY_FILE = "example.py"


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _name(page: Path) -> str:
    return (page.relative_to(DOCS) if page.is_relative_to(DOCS) else page.relative_to(REPO)).as_posix()


def _included(path: str) -> str:
    return (REPO / path).read_text()


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, with the markers on the lines right above it and its snippets included."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    rel = _name(page)
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group("indent")), m.group("fence"), m.group("lang").lower()
        markers: list[str] = []
        j = i - 1
        while j >= 0 and MARKER.match(lines[j]):
            markers.insert(0, MARKER.match(lines[j]).group(1))
            j -= 1
        body: list[str] = []
        files: list[str] = []
        k = i + 1
        while k < len(lines) and not lines[k].strip().startswith(fence[0] * len(fence)):
            text = lines[k][indent:] if lines[k][:indent].strip() == "" else lines[k].lstrip()
            snippet = SNIPPET.match(text)
            if snippet:
                files.append(snippet.group("path"))
            body.append(_included(snippet.group("path")).rstrip("\n") if snippet else text)
            k += 1
        whole = files[0] if len(files) == 1 and len([t for t in body if t.strip()]) == 1 else None
        found.append(Block(rel, i + 1, lang, "\n".join(body) + "\n", markers, whole))
        i = k + 1
    return found


def runnable() -> list:
    params = []
    for page in pages():
        for b in blocks(page):
            if b.lang in RUN_LANGS and b.runs:
                marks = [] if b.fast else [pytest.mark.slow]
                params.append(pytest.param(b, id=b.id, marks=marks))
    return params


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as CI builds it (`mkdocs build --strict`), once: its hooks run a live check for the hero image."""
    import importlib.util
    assert importlib.util.find_spec("mkdocs") and importlib.util.find_spec("material"), \
        "the docs tools are missing: pip install -c constraints.txt -e '.[docs]' (make install does)"
    out = tmp_path_factory.mktemp("docs") / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    said = r.stdout + r.stderr
    assert r.returncode == 0, said[-4000:]
    warnings = [line for line in said.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)
    return out


@pytest.mark.slow
def test_site_builds_strict_without_warnings(site):
    """How CI builds the docs: a broken link, a missing page or snippet, a nav entry without a file all fail here."""
    assert (site / "index.html").is_file()


def _finding_folders() -> list[Path]:
    return sorted(d for d in (REPO / "findings").iterdir() if (d / "REPORT.md").is_file())


@pytest.mark.slow
def test_the_site_has_the_support_page_and_a_page_per_finding(site):
    """The op support page and every triaged report are pages of the site (in its search index), not only files of
    the repository; each finding's page holds its report's title and its minimal repro."""
    page = (site / "support" / "index.html").read_text()
    assert "<h1 id=\"op-support\">Op support" in page and "data-search-exclude" in page and "id='q'" in page
    index = (site / "search" / "search_index.json").read_text()
    assert '"location":"support/"' in index and '"location":"findings/"' in index
    for d in _finding_folders():
        words = _words((site / "findings" / d.name / "index.html").read_text())
        assert _title(d) in words, d.name
        if (d / "repro.py").is_file():
            assert "repro.py" in words and "sys.exit" in words, d.name


def _words(page: str) -> str:
    """A page's text as a reader sees it: no tags, entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _title(folder: Path) -> str:
    """A report's title as its page shows it (inline code marks dropped)."""
    return (folder / "REPORT.md").read_text().splitlines()[0].lstrip("# ").strip().replace("`", "")


@pytest.mark.slow
def test_the_hero_image_is_drawn_by_the_build_from_this_install(site):
    """The hero is a live check's terminal grid as SVG text (readable at any size), naming this install's versions
    and this CPU; the repository's copy (the README's) names this install's versions too, or `make hero` is due (its
    CPU is the one it was drawn on, which it says)."""
    import torch

    from fpdiff.core.versions import cpu
    for svg in (site / "img" / "hero.svg", DOCS / "img" / "hero.svg"):
        words = _words(svg.read_text()).replace("\u00a0", " ")
        assert "fpdiff check example:tinycnn" in words and "pass" in words, svg
        assert f"torch {torch.__version__}" in words, f"{svg}: stale versions, run make hero"
    assert cpu().split(":")[0] in _words((site / "img" / "hero.svg").read_text()).replace("\u00a0", " ")


@pytest.mark.slow
def test_the_support_page_in_the_site_searches_and_links_a_finding(site):
    """In a real browser: the site's support page opens with a search in its address, shows only matching rows,
    and a row's finding link leads to that finding's page in the site."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("headless", REPO / "tests" / "report" / "headless.py")
    headless = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(headless)
    exe = headless.chromium()
    page = site / "support" / "index.html"
    linked = re.findall(r"<a class='finding-link' href='([^']+)'[^>]*>([^<]+)</a>", page.read_text())
    assert linked, "no row of the support page links a finding"
    href, found = linked[0]  # a finding's link and id: the search is its id, which every row it covers carries
    dom = subprocess.run([exe, *headless.FLAGS, "--window-size=1400,900", "--dump-dom", f"{page.as_uri()}#q={found}"],
                         capture_output=True, text=True, timeout=120)
    assert not headless.console_errors(dom.stderr), headless.console_errors(dom.stderr)
    rows = re.findall(r"<tr ([^>]*data-text=\"[^\"]*\"[^>]*)>", dom.stdout)
    shown = [r for r in rows if 'hidden=""' not in r]
    assert rows and shown and len(shown) < len(rows), (found, len(shown), len(rows))
    assert all(found in r for r in shown), found
    assert f"{len(shown)} of {len(rows)} rows shown" in dom.stdout
    target = (page.parent / href).resolve() / "index.html"
    opened = subprocess.run([exe, *headless.FLAGS, "--dump-dom", target.as_uri()], capture_output=True, text=True,
                            timeout=120)
    assert _title(REPO / "findings" / Path(href).name) in _words(opened.stdout), (href, opened.stdout[:500])


def test_every_marker_governs_a_block():
    """A `docs-test:` marker must sit right above a fence, and say something this file understands."""
    wrong = []
    for page in pages():
        lines = page.read_text().splitlines()
        for n, line in enumerate(lines):
            m = MARKER.match(line)
            if not m:
                continue
            below = n + 1
            while below < len(lines) and MARKER.match(lines[below]):
                below += 1
            rel = f"{page.relative_to(DOCS).as_posix()}:{n + 1}"
            if below >= len(lines) or not FENCE.match(lines[below]):
                wrong.append(f"{rel}: no fence right below the marker")
            if not re.fullmatch(r"skip\s*\(.+\)|exit(\s+\d+)+", m.group(1)):
                wrong.append(f"{rel}: unknown marker {m.group(1)!r}")
    assert not wrong, "\n".join(wrong)


def _cli_options() -> dict[str, set[str]]:
    """Each subcommand's option strings, and the global ones under ''."""
    import argparse

    from fpdiff import cli
    p = cli.parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    known = {"": set(p._option_string_actions)}
    for name, parser in sub.choices.items():
        known[name] = set(parser._option_string_actions)
    return known


_INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
_OPTION = re.compile(r"(?<![=\w\-])--[a-z][\w-]*")


def _calls(text: str):
    """(subcommand, its options) for each command in a line that starts with `fpdiff ` (after `$ ` or a CI step's
    `run: `; `;` and `&&` start another command): commands, synopses, inline code. `fpdiff --version` is ('', ...)."""
    for piece in re.split(r";|&&", text):
        piece = re.sub(r"^\s*(\$ |-? *run: )?", "", piece)
        m = re.match(r"fpdiff\s+(\S+)(.*)", piece)
        if m and re.fullmatch(r"-[\w-]+|[a-z][a-z0-9-]*", m.group(1)):  # not output such as `fpdiff X.Y.Z`
            sub, rest = m.groups()
            yield ("", [sub, *_OPTION.findall(rest)]) if sub.startswith("-") else (sub, _OPTION.findall(rest))


def _prose(page: Path) -> str:
    """The page without its fenced blocks."""
    out, fence = [], None
    for line in page.read_text().splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group("fence")
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            out.append(line)
    return "\n".join(out)


def test_every_option_on_the_pages_exists():
    """Every `fpdiff SUB --option` the pages write (commands, synopses, inline code) is one `fpdiff SUB --help` lists,
    and SUB is a subcommand."""
    known = _cli_options()
    wrong = []
    for page in [*pages(), REPO / "README.md"]:
        rel = _name(page)
        texts = []
        for b in blocks(page):
            # logical lines: a synopsis continues on indented lines, a command after a backslash
            logical: list[str] = []
            for line in b.text.splitlines():
                if logical and (logical[-1].endswith("\\") or (line[:1].isspace() and line.strip())):
                    logical[-1] = logical[-1].rstrip("\\") + " " + line.strip()
                else:
                    logical.append(line)
            texts += [(b.id, t) for t in logical]
        texts += [(rel, m.group(1)) for m in _INLINE.finditer(_prose(page))]
        for where, text in texts:
            for sub, options in _calls(text):
                if sub and sub not in known:
                    if sub not in NOT_HERE:
                        wrong.append(f"{where}: `fpdiff {sub}` is no subcommand")
                    continue
                wrong += [f"{where}: `fpdiff {sub}` has no option {opt}" for opt in options
                          if opt not in known[sub] | known[""]]
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_the_readme_links_every_page():
    """The README stays short and sends a reader to the pages: each by its path, each link resolving."""
    text = (REPO / "README.md").read_text()
    links = {m.group(1).split("#")[0] for m in re.finditer(r"\]\(([^)\s]+)\)", text) if "://" not in m.group(1)}
    missing = sorted(link for link in links if link and not (REPO / link).exists())
    assert not missing, missing
    unlinked = sorted(f"docs/{_name(p)}" for p in pages() if f"docs/{_name(p)}" not in links)
    assert not unlinked, unlinked


def _workdir(tmp_path: Path) -> Path:
    (tmp_path / "tests").symlink_to(REPO / "tests")
    shutil.copytree(DOCS / "examples", tmp_path / "docs" / "examples")
    return tmp_path


def _shown(expected: str, said: str) -> bool:
    """An abridged output line is in what was printed: its pieces between `...`, in order, whitespace aside."""
    pos = 0
    for piece in (" ".join(p.split()) for p in expected.split("...")):
        if not piece:
            continue
        pos = said.find(piece, pos)
        if pos < 0:
            return False
        pos += len(piece)
    return True


@pytest.mark.parametrize("block", runnable())
def test_example_runs(block: Block, tmp_path):
    if block.skip:
        pytest.skip(block.skip)
    work = _workdir(tmp_path)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "FPDIFF_STORE": str(work / "history.sqlite"), "NO_COLOR": "1"}
    commands = block.commands
    if block.lang == "python" and not block.file:
        (work / _PY_FILE).write_text(block.text)
    else:
        others = [c.text for c in commands if not RUNS.match(c.text)]
        assert not others, f"{block.id}: only fpdiff and python commands run here; mark the block skip: {others}"
    assert len(block.exits) in (1, len(commands)), f"{block.id}: {len(block.exits)} exit codes for {len(commands)}"
    for i, command in enumerate(commands):
        r = subprocess.run(command.text, shell=True, executable="/bin/bash", cwd=work, env=env, capture_output=True,
                           text=True, timeout=TIMEOUT)
        said = r.stdout + r.stderr
        assert r.returncode == block.exit_for(i), (f"{block.id}: `{command.text}` exited {r.returncode}, "
                                                   f"the page says {block.exit_for(i)}\n{said[-6000:]}")
        flat = " ".join(said.split())
        missing = [line for line in command.output if not _shown(line, flat)]
        assert not missing, (f"{block.id}: `{command.text}` did not print, as the page shows:\n" + "\n".join(missing)
                             + f"\n--- it printed:\n{said[-6000:]}")
