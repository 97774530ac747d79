"""The one backend lifecycle: a backend declares what it is, prepares a cell into something that runs, and that thing
is closed after the cell. A capability is a lifecycle method the backend implements (Backend.implements), never a
flag: the analyses ask the declarations and the methods, never a backend's name, and never run another
implementation under a backend's name."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fpdiff.core.compare import Finding
from fpdiff.core.errors import COMPILE, TORCH_EXPORT, StageError, Unsupported, UsageError, stage
from fpdiff.core.precision import Precision
from fpdiff.core.support import Support
from fpdiff.core.task import ONNX, PROGRAM, TORCH, Task

__all__ = ["DECLARATIONS", "LIFECYCLE", "ONNX", "PROGRAM", "TORCH", "Artifact", "Backend", "PluginAdapter", "Prepared",
           "Repro", "RoutedBackend", "Task", "TensorSpec", "adapt", "check_declarations", "routed"]


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a converted file, as the file declares it."""
    name: str
    shape: tuple[int | None, ...]  # None: a dim the file leaves dynamic
    dtype: str  # numpy's name: float32, float16, bfloat16, int64, bool


@dataclass
class Artifact:
    """What a converted file (the user's .pte, .tflite, .onnx) says about itself, read without running it: its
    inputs and outputs, and the precision it computes in as fpdiff names precisions, with how that was read."""
    path: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    precision: Precision  # fp32, fp16, bf16: the precision its cell is judged at, unless the user names one
    why: str  # how the precision was read ("weights float16, arithmetic float32: the converter's fp16")


@dataclass
class Prepared:
    """A prepared cell: the runnable, what the backend knows it really computes, and how to release it."""
    run: Callable[..., Sequence[Any]]
    computed_dtype: str | None = None  # None: read it from the outputs
    notes: list[Finding] = field(default_factory=list)  # facts only it knows: a replaced hint, the model's own casts
    info: dict[str, Any] = field(default_factory=dict)  # shown in the report; a verdict reads only typed fields
    release: Callable[[], None] | None = None  # frees sessions, contexts, compiled graphs
    output_names: list[str] = field(default_factory=list)  # prepare_marked: the ONNX tensor of each output
    # Float arithmetic ops the backend ran, counted by the dtype each computed in ({"float16": 30, "float32": 4});
    # None: it does not count them. Check's dtype-changed rule (core/dtypes.py) and its coarser-format reading use it.
    op_dtypes: dict[str, int] | None = None
    planned_op_dtypes: dict[str, int] | None = None  # the same count on the graph it was handed, when that mixes
    dtype_remedy: str | None = None  # how to get the requested dtype from this backend, said when it did not run it
    artifact: Path | None = None  # the converted file it ran (a .pte, .tflite, .vmfb): repro bundles copy it
    feeds: tuple[Any, ...] | None = None  # what run() is fed when not the task's inputs: a user's file's own order
    # rel L2 by which the exported ONNX graph it ran departs from the torch program in float64 (float32 constants,
    # onnxtools/export.py): check judges the cell with it as its baseline's floor
    export_departure: float | None = None
    support: Support | None = None  # the runtime's own word on each op at the dtype asked (core/support.py)
    # a quantized cell (prepare_quantized): "graph", the quantized ONNX file whose float64 emulation judges it
    # (onnxtools/emulate.py); "tool", what quantized it; "integer_ops"/"float_ops", the compute ops of the graph it
    # really ran by whether they ran in integers; "left_float", the compute nodes it left in float
    quantized: dict[str, Any] | None = None
    # a quantized cell's own quantized tensors by name (its activation quantizers' outputs), as it read them back
    read_back: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        if self.release is not None:
            self.release()
            self.release = None


@dataclass
class Repro:
    """What a backend gets to make a segment runnable on its own: the bundle folder (holding segment.pt2 or
    segment.onnx, and inputs/expected arrays), the segment itself, and the cell's precision, device and flags."""
    out: Path
    program: Any  # torch.export.ExportedProgram, or an onnx.ModelProto for ONNX sources
    onnx_segment: bool
    precision: Precision
    device: str
    flags: tuple[str, ...]
    meta: dict[str, Any]  # written to meta.json; a backend may add to it (its compile command)


class Backend:
    """Subclass this (or write the minimal plugin form, which an adapter turns into this).

    Declarations (class attributes; any other lowercase one is refused at registration, so a typo is never ignored;
    a backend's own constants are UPPER_CASE):
    - `name`: what the grid and the CLI call it;
    - `kinds`: the model kinds it runs: TORCH (torch models, and `.pt2` programs), ONNX (ONNX graphs, and `.onnx`
      programs). PROGRAM jobs (a model already at its precision: locate's segments, plan's trials) reach every
      backend whose kinds include the program's form, and are run as written, never cast;
    - `shape_variants`: False when every shape variant would run the same (eager torch runs what it is given);
    - `takes_flags`: the user's flags for it (--backend-flag NAME=FLAG) reach it as `task.flags`;
    - `independent`: its own implementation of every op it runs (not the judge's code, not another backend's): a
      witness when the float64 judge is in doubt (judging/judge.py);
    - `judge_flags`: flags that make its fp64 job the float64 judge, run apart from its fp64 cell (torch eager:
      the judge computes every op in float64, the cell runs the model's own casts); empty: the fp64 cell is the judge;
    - `judges`: the model kinds it is the float64 judge and per-precision baseline for (torch: torch models);
    - `cross_checks`: the model kinds it is the judge's independent fp32 cross-check for (ort: ONNX models);
    - `requires`: modules the default available() imports; `extra`: the pip extra that installs them (said when one
      does not import); `install_hint`: another way, when it is no extra;
    - `artifacts`: the suffixes of the converted files it runs as they are (`--artifact NAME=PATH`: the user's own
      `.tflite`, `.pte`, `.onnx`), through read_artifact and prepare_artifact;
    - `origin`, `route`: set by the registry (entry point or plugin file; a route to another interpreter or host).

    Lifecycle: `available()`, `prepare_task(task)` (required), and optionally `prepare_marked(task)` (every float
    intermediate of the ONNX graph as an output: locate --mark-all) and `repro(r)`. An analysis asks
    `cls.implements("prepare_marked")` before relying on an optional method and refuses in one line otherwise.
    """
    name: ClassVar[str]
    kinds: ClassVar[frozenset[str]] = frozenset({TORCH})
    shape_variants: ClassVar[bool] = True
    takes_flags: ClassVar[bool] = False
    independent: ClassVar[bool] = False
    judge_flags: ClassVar[tuple[str, ...]] = ()
    judges: ClassVar[frozenset[str]] = frozenset()
    cross_checks: ClassVar[frozenset[str]] = frozenset()
    requires: ClassVar[tuple[str, ...]] = ()  # modules it imports: the default available() tries them
    extra: ClassVar[str] = ""  # the pip extra that installs them: fpdiff[EXTRA]
    install_hint: ClassVar[str] = ""  # said when one does not import and no extra installs it
    artifacts: ClassVar[tuple[str, ...]] = ()  # suffixes of converted files it runs as they are: (".tflite",)
    origin: str = "built-in"  # set by the registry on the instance: entry point or plugin file
    route: ClassVar[Any] = None  # backends.routes.Route: the jobs run in another interpreter or on another host

    def reach(self) -> str | None:
        """Where an available backend stops short here (converts but cannot run, runs only files it is given): what
        `fpdiff backends` says beside "available"; None when it does everything it can here."""
        return None

    def available(self) -> str | None:
        """None when usable here, else why not (a missing package, no device)."""
        import importlib
        for module in self.requires:
            try:
                importlib.import_module(module)
            except ImportError as e:
                missing = isinstance(e, ModuleNotFoundError) and module.startswith(e.name or "?")
                why = "" if missing else f": {e}"  # not missing but broken: its own words say how
                return f"{module} does not import{why} ({self.how_to_install()})"
        return None

    @classmethod
    def how_to_install(cls) -> str:
        """The command that installs what `requires` names."""
        return f"pip install 'fpdiff[{cls.extra}]'" if cls.extra else cls.install_hint or "install it"

    def prepare_task(self, task: Task) -> Prepared:
        """Turn one cell (task: model, precision, device, shape variant, cache, flags) into a Prepared."""
        raise NotImplementedError

    def prepare_marked(self, task: Task) -> Prepared:
        """The cell's ONNX graph (at the task's precision, as prepare_task would run it) with every float tensor its
        nodes produce marked as an output: run(*inputs) returns their values in graph order, output_names names them."""
        raise Unsupported(f"{self.name} cannot mark every intermediate as an output")

    def prepare_module(self, module: Any, device: str, flags: tuple[str, ...] = ()) -> Prepared:
        """A torch module already at its precision (a plan's mixed module), run as written by this backend in the
        calling process: no export, no worker. Offered by a backend whose run needs no compile (torch eager), so
        plan's trials skip the export and the worker round trip; the numbers are still this backend's own, with the
        user's flags for it (--backend-flag) as a cell gets them."""
        raise Unsupported(f"{self.name} runs no module in the calling process")

    def prepare_quantized(self, task: Task) -> Prepared:
        """The cell's model quantized in the task's format (task.precision.scheme) by this backend's own tool, the
        way its users quantize, calibrated on task.calibration(), and prepared as this backend runs it; `quantized`
        names the quantized graph fpdiff emulates and counts what really ran in integers."""
        raise Unsupported(f"{self.name} has no quantization path in fpdiff for {task.precision.name}")

    def repro(self, r: Repro) -> str | None:
        """Python source that sets `outs` from `xs` (numpy inputs, `meta["input_dtypes"]`) using this backend
        alone, after writing what it needs into r.out; None when this backend writes no repro."""
        return None

    def export(self, task: Task, fp32: bool = False) -> Any:
        """The first step of every backend that lowers a torch program, charged to torch.export when it fails (not
        to the backend's converter): the cell's program, or with `fp32` the fp32 program of a backend that takes the
        precision as its own conversion's job; a program job (a segment, a plan trial) as written."""
        from fpdiff.core import precision as prec
        with stage(TORCH_EXPORT, "torch.export"):
            return (task if task.is_program or not fp32 else task.at(prec.FP32)).program()

    def handed(self, task: Task) -> tuple[Any, list[Any], list[str] | None]:
        """What this backend was handed for the cell, so a repro can hand it the same: (the torch program, or the
        ONNX graph as a ModelProto; the inputs; the dtypes they are fed in where not their own, else None)."""
        import onnx
        inputs = list(task.inputs())
        if task.is_torch:
            return task.program(), inputs, None
        return onnx.load(str(task.onnx_file())), inputs, None

    def read_artifact(self, path: Path) -> Artifact:
        """What a converted file declares (inputs, outputs, the precision it computes in), read without running it:
        the parent matches the model's inputs to it before any job, so a mismatch is one line."""
        raise Unsupported(f"{self.name} runs no converted file of the user's")

    def prepare_artifact(self, task: Task, path: Path) -> Prepared:
        """The user's converted file, run as it is in place of this backend's own conversion of the task's model:
        run(*inputs) gets torch tensors in the file's input order, each already in the file's declared dtype."""
        raise Unsupported(f"{self.name} runs no converted file of the user's")

    @classmethod
    def implements(cls, name: str) -> bool:
        """Whether this backend overrides the optional lifecycle method `name` (prepare_marked, repro, ...)."""
        if name not in LIFECYCLE:
            raise ValueError(f"{name!r} is not a lifecycle method; known: {', '.join(sorted(LIFECYCLE))}")
        return getattr(cls, name) is not getattr(Backend, name)


# The declarations a backend class may set, and the optional lifecycle methods implements() answers for.
DECLARATIONS = frozenset({"name", "kinds", "shape_variants", "takes_flags", "independent", "judge_flags", "judges",
                          "cross_checks", "requires", "extra", "install_hint", "artifacts", "origin", "route"})
LIFECYCLE = frozenset({"prepare_marked", "prepare_module", "repro", "read_artifact", "prepare_artifact",
                       "prepare_quantized"})
# The optional methods a route's worker runs in the route's interpreter: a route has them where its base backend does
ROUTED = frozenset({"prepare_quantized"})
# Declarations that were removed: each made fpdiff run another implementation under the backend's name.
_REMOVED = {"all_outputs": "implement prepare_marked",
            "verifies_onnx_plans": "plan runs its trials on the named backend as program jobs: declare kinds",
            "runs_modules": "plan runs and times its trials on the named backend as program jobs: declare kinds",
            "reference": "declare judges"}


def reading_back(run: Callable[..., list[Any]], graph: Path, record: dict[str, Any], into: dict[str, Any],
                 run_marked: Callable[[Any, tuple], list[Any]],
                 first: Callable[[tuple], None] | None = None) -> Callable[..., list[Any]]:
    """run(*inputs) for a quantized cell; its first call also reads every activation quantizer's values `into` a dict
    by tensor: `run_marked(model, inputs)` runs the graph with them marked as outputs the backend's way, and they are
    kept only where that program's outputs are the cell's bit for bit (onnxtools/emulate.py read_back); the record
    says whether they were. `first(inputs)`: what else the backend reads on that first call."""
    state = {"read": False}

    def call(*inputs: Any) -> list[Any]:
        outs = run(*inputs)
        if state["read"]:
            return outs
        state["read"] = True
        if first is not None:
            first(inputs)
        import numpy as np
        import onnx

        from fpdiff.onnxtools.emulate import read_back
        try:
            values = read_back(onnx.load(str(graph)), [np.asarray(o) for o in outs], lambda m: run_marked(m, inputs))
        except StageError as e:  # the marked program is another program: its failure is not the cell's
            values = None
            record["read_back_failed"] = str(e)
        record["read_back"] = values is not None
        into.update(values or {})
        return outs
    return call


def nodes_left_float(flags: Sequence[str], backend: str, option: str, precision: Precision) -> tuple[str, ...]:
    """The nodes the user's flags have a backend's quantizer leave float (`OPTION=A,B`, the quantizer's own option,
    nodes of the float graph it quantizes); any other flag, or the option in a cell that is not quantized, is one
    line."""
    return quantizer_nodes(flags, backend, (option,), precision)[option]


def quantizer_nodes(flags: Sequence[str], backend: str, options: Sequence[str], precision: Precision
                    ) -> dict[str, tuple[str, ...]]:
    """The node lists the user's flags hand a backend's quantizer (`OPTION=A,B` for each of its `options`, nodes of
    the float graph it quantizes), by option; any other flag, or one in a cell that is not quantized, is one line."""
    prefixes = tuple(f"{o}=" for o in options)
    other = [f for f in flags if not f.startswith(prefixes)]
    if other:
        said = " or ".join(f"{backend}={p}NODE,NODE" for p in prefixes)
        raise UsageError(f"{backend} takes --backend-flag {said} (a quantized cell's nodes for its quantizer); "
                         f"got {', '.join(other)}")
    out = {o: tuple(n for f in flags if f.startswith(f"{o}=") for n in f.removeprefix(f"{o}=").split(",") if n)
           for o in options}
    given = [o for o, nodes in out.items() if nodes]
    if given and not precision.is_quantized:
        raise UsageError(f"--backend-flag {backend}={given[0]}=... names nodes of a quantized cell for its "
                         f"quantizer; this cell is {precision.name}, not quantized")
    return out


def check_declarations(names: dict[str, Any], who: str) -> None:
    """Refuse a value `names` sets that is no declaration: a typo (`all_output = True`) must not be ignored.
    Private names, UPPER_CASE constants and methods (any descriptor) are the class's own."""
    for key, value in names.items():
        if key.startswith("_") or key.isupper() or key in DECLARATIONS or callable(value) or hasattr(value, "__get__"):
            continue
        why = f"{key!r} was removed ({_REMOVED[key]})" if key in _REMOVED else f"{key!r} is no backend declaration"
        raise UsageError(f"{who}: {why}; the declarations are {', '.join(sorted(DECLARATIONS))}")


class PluginAdapter(Backend):
    """The minimal plugin form (`name`, `available()`, `prepare(program, precision, device)`) as a Backend: it
    gets the cell's torch program, cast for whole-model precisions (the autocast graph for amp-*)."""
    plugin: ClassVar[type]

    def __init__(self) -> None:
        self._inner = self.plugin()

    def available(self) -> str | None:
        return self._inner.available()

    def prepare_task(self, task: Task) -> Prepared:
        if not task.is_torch:
            raise Unsupported(f"{self.name} takes torch programs; this model is ONNX")
        with stage(TORCH_EXPORT, "torch"):
            program = task.program()
        with stage(COMPILE, f"plugin {self.name}"):
            return Prepared(self._inner.prepare(program, task.precision.name, task.device))

    def repro(self, r: Repro) -> str | None:
        if r.onnx_segment or not self.origin.startswith("plugin "):
            return None
        import shutil
        plugin_file = Path(self.origin.removeprefix("plugin "))
        shutil.copy(plugin_file, r.out / plugin_file.name)
        r.meta["plugin_file"] = plugin_file.name
        return TORCH_INPUTS + '''import importlib.util
spec = importlib.util.spec_from_file_location("plugin", str(here / meta["plugin_file"]))
plugin = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plugin)
backend = next(c for c in vars(plugin).values() if getattr(c, "name", None) == meta["backend"])()
with torch.no_grad():
    outs = backend.prepare(program, meta["precision"], meta["device"])(*xt)
'''


class RoutedBackend(Backend):
    """A backend whose jobs run elsewhere (backends/routes.py): here it only declares; its worker prepares."""

    base: ClassVar[type[Backend] | None] = None  # the backend the route runs, where it is known here

    def prepare_task(self, task: Task) -> Prepared:
        raise Unsupported(f"{self.name} runs in {self.route.where}, not in this process")

    @classmethod
    def implements(cls, name: str) -> bool:
        """A quantized cell is prepared in the route's worker (runtime/worker.py), so a route has the base backend's
        quantization path; the other optional methods run in this process, where the route has none."""
        return super().implements(name) or (name in ROUTED and cls.base is not None and cls.base.implements(name))


def routed(route: Any, base: type[Backend] | None) -> type[Backend]:
    """The class fpdiff sees for a route: the base backend's declarations when it is known here, else the route's
    own (kinds etc. from fpdiff.toml). It implements no optional lifecycle method run in this process, only those
    its worker runs (ROUTED)."""
    decl: dict[str, Any] = {"kinds": base.kinds, "shape_variants": base.shape_variants,
                            "takes_flags": base.takes_flags, "judge_flags": base.judge_flags} if base \
        else {"kinds": frozenset(route.declarations.get("kinds", [TORCH]))}
    decl.update({k: v for k, v in route.declarations.items() if k != "kinds"})
    check_declarations(decl, f"route {route.name}")
    return type(f"Routed_{route.base}", (RoutedBackend,), {"name": route.name, "route": route, "base": base, **decl,
                                                           "__module__": __name__})


def adapt(cls: Any) -> type[Backend]:
    """A class in either form as a Backend subclass; a declaration it sets that fpdiff would not read (a typo, or a
    declaration on the minimal form, which has none) is a UsageError."""
    if isinstance(cls, type) and issubclass(cls, Backend):
        for c in cls.__mro__:
            if c not in (Backend, PluginAdapter, RoutedBackend, object):
                check_declarations(dict(vars(c)), f"backend {cls.name!r} ({c.__qualname__})")
        return cls
    declared = sorted(k for k in vars(cls) if k in DECLARATIONS - {"name"} or k in _REMOVED)
    if declared:
        raise UsageError(f"backend {cls.name!r}: the minimal plugin form takes no declarations ({', '.join(declared)}):"
                         " subclass fpdiff.backends.Backend to declare them")
    return type(f"{cls.__name__}Adapter", (PluginAdapter,), {"name": cls.name, "plugin": cls,
                                                              "__module__": cls.__module__})


# Repro snippets share these: numpy inputs as the segment's torch inputs, and as the dtypes a runtime takes.
TORCH_INPUTS = '''import torch
def as_torch(x, dtype):
    t = torch.from_numpy(x)
    return t.to(getattr(torch, dtype)) if t.is_floating_point() else t
xt = [as_torch(x, d) for x, d in zip(xs, meta["input_dtypes"])]
program = torch.export.load(str(here / "segment.pt2"))
'''
NUMPY_INPUTS = '''def as_np(x, dtype):
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dtype) if x.dtype.kind == "f" else x
'''
