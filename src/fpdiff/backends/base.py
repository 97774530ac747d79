"""The one backend lifecycle: a backend declares what it can do, prepares a cell into something that runs, and
that thing is closed after the cell. The analyses ask the declarations, never a backend's name."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from fpdiff.core.errors import COMPILE, TORCH_EXPORT, Unsupported, stage

TORCH, ONNX = "torch", "onnx"  # the model kinds a backend may take: torch programs, ONNX graphs


@dataclass
class Prepared:
    """A prepared cell: the runnable, what the backend knows it really computes, and how to release it."""
    run: Callable[..., Sequence[Any]]
    computed_dtype: str | None = None  # None: read it from the outputs
    notes: list = field(default_factory=list)  # compare.Finding: facts such as a demoted signature
    info: dict = field(default_factory=dict)  # e.g. {"cache": "hit", "op_dtypes": {...}}
    release: Callable[[], None] | None = None  # frees sessions, contexts, compiled graphs

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
    precision: str
    device: str
    flags: tuple[str, ...]
    meta: dict  # written to meta.json; a backend may add to it (its compile command)


class Backend:
    """Subclass this (or write the minimal plugin form, which an adapter turns into this).

    Declarations the analyses read:
    - `kinds`: the model kinds it runs (TORCH programs and modules, ONNX graphs);
    - `shape_variants`: False when every shape variant would run the same (eager torch runs what it is given);
    - `takes_flags`: user compiler flags (--iree-flag) reach it;
    - `reference`: the reference implementation, analysed op by op by locate (torch eager);
    - `runs_modules`: runs the nn.Module itself, so plan can apply a mixed module and time it;
    - `all_outputs`: can mark every intermediate as an output in one run (locate --mark-all);
    - `independent`: its own implementation of every op it runs (not the judge's code, not another backend's): a
      witness when the float64 judge is in doubt (check/judge.py);
    - `verifies_onnx_plans`: runs mixed ONNX graphs for plan on ONNX models;
    - `judge_flags`: flags that make its fp64 job the float64 judge, run apart from its fp64 cell (torch eager:
      the judge computes every op in float64, the cell runs the model's own casts); empty: the fp64 cell is the judge.
    """
    name: ClassVar[str]
    kinds: ClassVar[frozenset[str]] = frozenset({TORCH})
    shape_variants: ClassVar[bool] = True
    takes_flags: ClassVar[bool] = False
    reference: ClassVar[bool] = False
    runs_modules: ClassVar[bool] = False
    all_outputs: ClassVar[bool] = False
    verifies_onnx_plans: ClassVar[bool] = False
    independent: ClassVar[bool] = False
    judge_flags: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()  # modules it imports: the default available() tries them
    install_hint: ClassVar[str] = ""  # said when one does not import
    origin: ClassVar[str] = "built-in"  # set by the registry: entry point or plugin file
    route: ClassVar[Any] = None  # backends.routes.Route: the jobs run in another interpreter or on another host

    def available(self) -> str | None:
        """None when usable here, else why not (a missing package, no device)."""
        import importlib
        for module in self.requires:
            try:
                importlib.import_module(module)
            except ImportError as e:
                return f"{module} does not import: {e}" + (f" ({self.install_hint})" if self.install_hint else "")
        return None

    def prepare_task(self, task) -> Prepared:
        """Turn one cell (task: model, precision, device, shape variant, cache, flags) into a Prepared."""
        raise NotImplementedError

    def repro(self, r: Repro) -> str | None:
        """Python source that sets `outs` from `xs` (numpy inputs, `meta["input_dtypes"]`) using this backend
        alone, after writing what it needs into r.out; None when this backend writes no repro."""
        return None


class PluginAdapter(Backend):
    """The minimal plugin form (`name`, `available()`, `prepare(program, precision, device)`) as a Backend: it
    gets the cell's torch program, cast for whole-model precisions (the autocast graph for amp-*)."""
    plugin: ClassVar[type]

    def __init__(self) -> None:
        self._inner = self.plugin()

    def available(self) -> str | None:
        return self._inner.available()

    def prepare_task(self, task) -> Prepared:
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

    def prepare_task(self, task) -> Prepared:
        raise Unsupported(f"{self.name} runs in {self.route.where}, not in this process")


def routed(route, base: type[Backend] | None) -> type[Backend]:
    """The class fpdiff sees for a route: the base backend's declarations when it is known here (analyses that run
    modules or mark outputs in-process stay local), else the route's own (kinds etc. from fpdiff.toml)."""
    decl = {"kinds": base.kinds, "shape_variants": base.shape_variants, "takes_flags": base.takes_flags,
            "judge_flags": base.judge_flags} if base \
        else {"kinds": frozenset(route.declarations.get("kinds", [TORCH]))}
    decl.update({k: v for k, v in route.declarations.items() if k != "kinds"})
    return type(f"Routed_{route.base}", (RoutedBackend,), {"name": route.name, "route": route, **decl,
                                                           "__module__": __name__})


def adapt(cls: type) -> type[Backend]:
    """A class in either form as a Backend subclass."""
    if isinstance(cls, type) and issubclass(cls, Backend):
        return cls
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
