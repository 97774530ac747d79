"""What every analysis that runs backends shares, in one object with one meaning per option, validated once per
run: the backends (built-ins, entry points, --plugin files, routes) built into one registry, each backend's own
flags, the seconds a job may take, the seed of generated inputs, the compile cache, the user's inputs and shapes,
a checkpoint's task, and where progress goes. An analysis's own options are its own dataclass beside it."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fpdiff.analysis.base import flags_by_backend
from fpdiff.core.errors import UsageError
from fpdiff.judging.grid import GridSettings
from fpdiff.runtime.worker import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from fpdiff.backends import Registry
    from fpdiff.backends.routes import Routes

# progress(what, done, total): the step under way, how far it is, its size (None: not known ahead)
Progress = Callable[[str, int, "int | None"], None]


@dataclass(frozen=True)
class RunOptions:
    """The options every analysis reads the same way. `cache_dir`: None the default folder (FPDIFF_CACHE, else
    ~/.cache/fpdiff), False no compile cache, a path that folder. `backend_flags`: backend name -> its own flags.
    `routes`: backends run in another interpreter or on a worker host, for this run only. None for backend_flags
    is none."""
    plugins: Sequence[str] = ()
    backend_flags: Mapping[str, Sequence[str]] | None = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    seed: int = 0
    cache_dir: str | Path | bool | None = None
    inputs: str | Path | None = None
    shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    task: str | None = None  # a Hugging Face checkpoint's class (hf:DIR): a task name or a transformers class
    progress: Progress | None = None
    routes: Routes | None = None
    # set by ready(): the one registry of this run and each backend's flags, checked against it
    registry: Registry | None = field(default=None, compare=False, repr=False)
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    def checked(self) -> RunOptions:
        """These options checked, for an analysis that runs no backend (no registry built: ranges)."""
        _check(self)
        return dataclasses.replace(self, plugins=tuple(self.plugins), shapes=_shapes(self.shapes),
                                   backend_flags=dict(self.backend_flags or {}))

    def ready(self) -> RunOptions:
        """These options checked, with the run's registry built (under the routes in force); once per run: options
        already made ready are returned as they are."""
        if self.registry is not None:
            return self
        o = self.checked()
        from fpdiff.backends import registry
        reg = registry(o.plugins)
        return dataclasses.replace(o, registry=reg, flags=flags_by_backend(reg, o.backend_flags))

    def load_args(self) -> dict[str, Any]:
        """What loading the model reads of these options (sources.load's keywords)."""
        return {"inputs": self.inputs, "shapes": self.shapes, "seed": self.seed, "task": self.task}

    def grid(self, **own: Any) -> GridSettings:
        """The grid's settings: what these options say of plugins, flags, cache, seed and loading, and the
        analysis's `own` (backends, precisions, repeat, ...); `own` load_args are added to these options'."""
        load_args = {**self.load_args(), **own.pop("load_args", {})}
        return GridSettings(plugins=tuple(self.plugins), flags=dict(self.flags), cache_dir=self.cache, seed=self.seed,
                            load_args=load_args, **own)

    @property
    def cache(self) -> str | bool | None:
        """The cache folder as the runtime takes it (None default, False off, a path)."""
        return str(self.cache_dir) if isinstance(self.cache_dir, Path) else self.cache_dir

    def step(self, what: str, done: int, total: int | None) -> None:
        """Tell the progress display, if any."""
        if self.progress is not None:
            self.progress(what, done, total)


def _check(o: RunOptions) -> None:
    """Each shared option's type and range, one line for the first that is wrong."""
    if isinstance(o.plugins, str):
        raise UsageError(f"plugins is a list of .py files, not one string ({o.plugins!r})")
    if isinstance(o.timeout, bool) or not isinstance(o.timeout, (int, float)) or not o.timeout > 0:
        raise UsageError(f"timeout is seconds per job, a number above 0, not {o.timeout!r}")
    if isinstance(o.seed, bool) or not isinstance(o.seed, int):
        raise UsageError(f"seed is an integer, not {o.seed!r}")
    if o.cache_dir is True or not isinstance(o.cache_dir, (str, Path, bool, type(None))):
        raise UsageError(f"cache_dir is a folder, None (the default folder) or False (no cache), not {o.cache_dir!r}")
    if o.inputs is not None and not isinstance(o.inputs, (str, Path)):
        raise UsageError(f"inputs is the path of an .npz file, not {type(o.inputs).__name__}")
    if o.task is not None and not (isinstance(o.task, str) and o.task):
        raise UsageError(f"task names a task or a transformers class (causal-lm, AutoModelForCausalLM), not {o.task!r}")
    if o.backend_flags is not None and not isinstance(o.backend_flags, Mapping):
        raise UsageError("backend_flags maps a backend's name to its flags ({'iree': ['--iree-opt-level=O3']})")
    if o.progress is not None and not callable(o.progress):
        raise UsageError("progress is a function (what, done, total)")


def _shapes(shapes: Mapping[str, Sequence[int]] | None) -> dict[str, list[int]]:
    """NAME -> dims, each a non-negative integer."""
    if shapes is None:
        return {}
    if not isinstance(shapes, Mapping):
        raise UsageError("shapes maps an input's name to its dims ({'x': [1, 3, 224, 224]})")
    out: dict[str, list[int]] = {}
    for name, dims in shapes.items():
        ok = isinstance(dims, Sequence) and not isinstance(dims, str) and all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims)
        if not ok:
            raise UsageError(f"the shape of {name} is a list of non-negative integers, not {dims!r}")
        out[str(name)] = list(dims)
    return out


def fields() -> tuple[str, ...]:
    """The options a caller gives (not what ready() sets)."""
    return tuple(f.name for f in dataclasses.fields(RunOptions) if f.name not in ("registry", "flags"))


def split(kwargs: Mapping[str, Any], own: type) -> tuple[dict[str, Any], dict[str, Any]]:
    """Keyword arguments as (the analysis's own options, the shared ones)."""
    mine = {f.name for f in dataclasses.fields(own)}
    return ({k: v for k, v in kwargs.items() if k in mine}, {k: v for k, v in kwargs.items() if k not in mine})
