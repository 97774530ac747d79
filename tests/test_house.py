"""The house rules, checked on the code itself: imports flow one way (no cycles, never up a layer), no private name
crosses a module, and only backends/ knows backend names (everything else asks a backend's declarations)."""
import ast
from pathlib import Path

import fpdiff
from conftest import builtin_backends

SRC = Path(fpdiff.__file__).parent
BUILTIN_NAMES = builtin_backends()


def modules() -> dict[str, Path]:
    found = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = p
    return found


def imports(name: str, path: Path, known: dict) -> set[str]:
    """fpdiff modules this one imports, at any depth of its code (imports inside functions count too)."""
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def test_no_import_cycles():
    known = modules()
    graph = {m: imports(m, p, known) for m, p in known.items()}
    # a package's __init__ may hand on its submodules' names; a submodule importing its own package is the cycle
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(t):] + [t]))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


# The layers, bottom to top, by the first name under fpdiff ("" is the package's own __init__): a module imports its
# own layer and those below it, never one above. Nothing is allowed past this table.
LAYERS = {
    "core": 0,  # the vocabulary every layer speaks (precisions, statuses, errors, metrics, the Task contract)
    "examples": 0,  # the example models: plain torch, loaded by file; they import nothing of fpdiff
    "onnxtools": 1,  # ONNX graphs exported, cast and evaluated: know precisions, not models, sources or backends
    "model": 2,  # torch model transforms (autocast, the float64 mode, segments); autocast exports through onnxtools
    "sources": 3,  # where a model comes from and how it loads (spec, example, ONNX file): built on model, onnxtools
    "backends": 4,  # prepare and run one cell: see core's Task contract, never the runtime that hands them the cell
    "runtime": 5,  # jobs, worker processes, caches, remote workers: run backends, know no analysis
    "judging": 6,  # the judging engine: the grid of cells, running it, the float64 judge, evidence, the rules
    "analysis": 7,  # check, locate, plan, ranges, ops, fuzz: analyses on the judging floor, returning results
    "report": 8,  # results shown and stored (terminal, HTML, JSON, JUnit, the store): read what analyses return
    "analyses": 9,  # each analysis declared (options, run, CLI arguments, renderers) and the registry of them
    "testing": 10,  # assert_agrees: a check and its terminal report, for users' own test suites
    "api": 11,  # the public Python API: a function per registered analysis, and assert_agrees
    "": 12,  # the package: hands on the API's names, loaded on first use
    "cli": 13, "pytest_plugin": 13, "__main__": 13,  # entry points: nothing of fpdiff imports them
}


def layer(module: str) -> int | None:
    """The rank of a module's layer (None: a part of the package the table does not place)."""
    return LAYERS.get(module.split(".")[1] if "." in module else "")


def test_every_import_goes_to_the_same_or_a_lower_layer():
    """A lower layer hands its data up (a return value, a declaration, a Task), it never reaches up for a helper:
    what two layers share lives in the lower one."""
    known = modules()
    unplaced = sorted(m for m in known if layer(m) is None)
    assert not unplaced, f"parts of fpdiff with no layer in LAYERS: {unplaced}"
    upward = [f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
              for m, p in sorted(known.items()) for t in sorted(imports(m, p, known)) if layer(t) > layer(m)]
    assert not upward, "imports up a layer:\n" + "\n".join(upward)


def test_no_private_name_is_imported_across_modules():
    crossing = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("fpdiff")) \
                    and node.module != name:  # a module may import itself (a __main__ block serving its own names)
                crossing += [f"{name}: {a.name}" for a in node.names
                             if a.name.startswith("_") and not a.name.startswith("__")]
    assert not crossing, crossing


def _is_kind(node: ast.AST) -> bool:
    """`x.kind == "torch"` compares a model kind (torch or onnx), not a backend."""
    return isinstance(node, ast.Attribute) and node.attr == "kind"


def test_no_backend_name_is_compared_outside_backends():
    found = []
    for name, path in modules().items():
        if name.startswith("fpdiff.backends"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            if any(_is_kind(o) for o in operands):
                continue
            for o in operands:
                consts = [o] if isinstance(o, ast.Constant) else list(getattr(o, "elts", []))
                hits = [c.value for c in consts if isinstance(c, ast.Constant) and c.value in BUILTIN_NAMES]
                found += [f"{name}:{node.lineno} compares {h!r}" for h in hits]
    assert not found, found


def test_no_package_global_is_shadowed_by_its_own_submodule():
    """Importing pkg.sub sets the attribute `sub` on pkg: a global of pkg/__init__.py with that name (an imported
    module, a function) is silently replaced the first time the submodule loads."""
    clashes = []
    for name, path in modules().items():
        if path.name != "__init__.py":
            continue
        subs = {p.stem for p in path.parent.glob("*.py") if p.stem != "__init__"} | {
            p.name for p in path.parent.iterdir() if (p / "__init__.py").exists()}
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound = {(a.asname or a.name).split(".")[0] for a in node.names}
                clashes += [f"{name}: {b}" for b in bound & subs
                            if not (isinstance(node, ast.ImportFrom) and (node.module or "").endswith(f"{name}.{b}"))
                            and not (isinstance(node, ast.ImportFrom) and node.module == name)]
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in subs and node in tree.body:
                clashes.append(f"{name}: def {node.name}")
    assert not clashes, clashes


def test_test_folders_mirror_the_packages():
    """tests/X/ holds the tests of src/fpdiff/X/: a folder for a package that does not exist is a stale mirror."""
    tests = Path(__file__).parent
    stray = [str(d.relative_to(tests)) for d in tests.rglob("*") if d.is_dir() and any(d.glob("test_*.py"))
             and d != tests and not (SRC / d.relative_to(tests)).is_dir()]
    assert not stray, stray


def _analysis(module: str) -> str | None:
    """The analysis a module belongs to (fpdiff.analysis.ops.batch: ops), None outside analysis/."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "analysis" else None


def test_no_analysis_reaches_into_another_lazily():
    """What one analysis takes of another is at the top of its file, where the picture of the house shows it; an
    import inside a function hides the arrow (judging/ is the floor they share)."""
    found = []
    for name, path in modules().items():
        mine = _analysis(name)
        if mine is None:
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module and _analysis(node.module) not in (None, mine):
                    found.append(f"{name}:{node.lineno} imports {node.module} inside {fn.name}")
    assert not found, found


# a function taking more than this many parameters wants its settings as one object (judging.grid.GridSettings)
MAX_PARAMETERS = 8


def test_no_function_of_the_analyses_or_the_judging_floor_takes_over_eight_parameters():
    found = []
    for name, path in modules().items():
        if name.split(".")[1:2] not in (["analysis"], ["judging"]):
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = fn.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
                n = len(names) - (names[:1] in (["self"], ["cls"])) + (a.vararg is not None) + (a.kwarg is not None)
                if n > MAX_PARAMETERS:
                    found.append(f"{name}:{fn.lineno} {fn.name} takes {n}")
    assert not found, found

