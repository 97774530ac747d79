"""Which jobs a check runs: the cells asked for, each precision's baseline and the judge's cross-check, in the
order they run (the float64 reference first: nothing is judged without it). Bad input fails here, before any work."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fpdiff.backends import Registry, cross_check_for, judge_for
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.model import graph
from fpdiff.model.graph import STATIC, ShapeVariant
from fpdiff.runtime import jobdata, rundir
from fpdiff.runtime.cache import run_folder
from fpdiff.runtime.task import Job
from fpdiff.sources import Source, load


@dataclass(frozen=True)
class CellKey:
    """A cell, or any job of a check (a baseline, a witness), by what makes it: the backend, the device, the
    precision with the model's own tolerance already applied (precision.effective), the shape variant. Names are made
    of it only at the job protocol and the report."""
    backend: str
    device: str
    precision: prec.Precision
    variant: ShapeVariant

    def __str__(self) -> str:
        return f"{self.backend} {self.device} {self.precision.name} {self.variant.name}"


@dataclass(frozen=True)
class GridSettings:
    """Everything a grid is made of besides the model and the registry, in one picklable object: an analysis builds it
    once from its options and hands it on whole (a sweep's batches carry it to other hosts). `cache_dir`: None the
    default folder, False none, a path that folder; `load_args`: sources.load's keywords; `artifacts`: the user's
    converted files, BACKEND[:PRECISION]=PATH. Precisions may be given by name: they are parsed here, once."""
    backends: tuple[str, ...] = ()
    precisions: tuple[prec.Precision, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    shape_variants: tuple[str, ...] | None = None
    allow_nonfinite: bool = False
    repeat: int = 1
    plugins: tuple[str, ...] = ()
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # backend name -> its flags
    cache_dir: str | None | bool = None
    seed: int = 0
    artifacts: tuple[str, ...] = ()
    load_args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parsed = tuple(p if isinstance(p, prec.Precision) else prec.get(p) for p in self.precisions)
        object.__setattr__(self, "precisions", parsed)


@dataclass
class Grid:
    source: Source
    reg: Registry
    precisions: list[prec.Precision]
    cells: list[CellKey]
    judge_backend: str
    data_path: str
    settings: GridSettings = field(default_factory=GridSettings)  # cache_dir resolved to the run's folder
    # (backend, precision) -> the user's converted file that cell runs in place of the backend's own conversion
    artifacts: Mapping[tuple[str, str], str] = field(default_factory=dict)

    @property
    def flags(self) -> Mapping[str, tuple[str, ...]]:
        return self.settings.flags

    @property
    def seed(self) -> int:
        return self.settings.seed

    def key(self, backend: str, device: str, precision: prec.Precision, variant: ShapeVariant) -> CellKey:
        """The key of a job of this check: the precision with the model's own tolerance."""
        return CellKey(backend, device, prec.effective(precision, self.source.tolerance), variant)

    @cached_property
    def baselines(self) -> dict[str, CellKey]:
        """Each precision's baseline: the judge's own code at that precision (on cuda where only cuda has it)."""
        return {p.name: self.key(self.judge_backend, "cuda" if p.cuda_only else "cpu", p, STATIC)
                for p in self.precisions}

    def baseline(self, p: prec.Precision) -> CellKey:
        """The baseline of a precision, whether or not the grid runs it (a narrower format a backend substituted)."""
        return self.baselines.get(p.name) or self.key(self.judge_backend, "cpu", p, STATIC)

    @property
    def witness_variant(self) -> ShapeVariant:
        """The variant independent implementations are held against the judge on: the graph as the judge reads it,
        as written (an ONNX graph's symbolic dims left dynamic; a pinned graph can be refused where the model
        runs)."""
        if self.source.ref.kind == "onnx" and self.source.dynamic_shapes is not None:
            return ShapeVariant("dynamic", frozenset())
        return STATIC

    @property
    def judge_fp32(self) -> CellKey:
        """The judge's own fp32 run: the baseline its cross-check is measured against."""
        return self.key(self.judge_backend, "cpu", prec.FP32, STATIC)

    @property
    def cross_check(self) -> CellKey | None:
        """The independent fp32 implementation the judge is held against (backends' `cross_checks`), or None."""
        other = cross_check_for(self.source.ref.kind)
        return self.key(other, "cpu", prec.FP32, self.witness_variant) if other is not None else None

    @property
    def judge_flags(self) -> tuple[str, ...]:
        """Flags that make the judge's fp64 job the float64 reference, run apart from its fp64 cell (base.py)."""
        return self.reg.cls(self.judge_backend).judge_flags

    @property
    def reference(self) -> CellKey:
        """The judge's float64 run."""
        return self.key(self.judge_backend, "cpu", prec.FP64, STATIC)

    def order(self) -> list[CellKey]:
        """Every job once, the float64 reference first (unless the judge runs it apart), then baselines, the
        judge's cross-check, the cells."""
        fp64 = [self.reference] * (not self.judge_flags)
        checks = [self.judge_fp32, *([self.cross_check] if self.cross_check else [])]
        return list(dict.fromkeys([*fp64, *self.baselines.values(), *checks, *self.cells]))

    @cached_property
    def cell_keys(self) -> set[CellKey]:
        """The cells' keys, to tell a cell's job (repeated) from a baseline's."""
        return set(self.cells)

    def job(self, key: CellKey) -> Job:
        """The job of a key; a cell's runs `repeat` times (nondeterminism), the others once."""
        cell = key in self.cell_keys
        n = self.settings.repeat if cell else 1
        artifact = self.artifacts.get((key.backend, key.precision.name)) if cell else None
        s = self.settings
        return Job(self.source.ref, self.data_path, key.backend, key.precision, key.device, key.variant,
                   s.plugins, s.flags.get(key.backend, ()), s.cache_dir, s.seed, n, artifact=artifact)


def make_grid(model: str, reg: Registry, settings: GridSettings) -> Grid:
    """Check every setting, load the model, write its job data: the grid of cells to run. Each of the settings'
    artifacts runs on its backend in place of that backend's own conversion."""
    s = settings
    given = [_artifact(a) for a in s.artifacts]
    backends = [*s.backends, *(b for b, _, _ in given if b not in s.backends)]
    for b in backends:
        reg.create(b)  # unknown names fail here, before any work
    cache = run_folder(s.cache_dir)
    ps = _precisions(list(s.precisions), s.devices, s.repeat)
    asked = len(ps)
    source = load(model, **s.load_args)
    _check_inputs(source, s.allow_nonfinite)
    for name in source.tolerance:
        prec.get(name)
    # an ONNX graph's symbolic dims are its exporter's default, not a declaration: static and dynamic by default
    # (the mixed variants on request, --shape-variants); a spec's dynamic_shapes() asks for every variant
    variants = graph.variants(source.dynamic_shapes, mixed=source.ref.kind != "onnx")
    if s.shape_variants:
        variants = [graph.find_variant(source.dynamic_shapes, v) for v in s.shape_variants]
    files = _artifact_cells(reg, given, source)
    converted = {b for b, _ in files}
    ps += [p for p in dict.fromkeys(p for _, p in files) if p not in ps]  # each file's has its baseline
    data_path = _write_data(source, rundir.mkdtemp(prefix="fpdiff-check-"))
    artifacts = {(b, p.name): path for (b, p), path in files.items()}
    grid = Grid(source, reg, ps, [], judge_for(source.ref.kind), data_path, replace(s, cache_dir=cache), artifacts)
    grid.cells = [grid.key(b, d, p, v) for b in backends if b not in converted for d in s.devices for p in ps[:asked]
                  for v in (variants if reg.cls(b).shape_variants else [STATIC])]
    grid.cells += [grid.key(b, "cpu", p, STATIC) for b, p in files]
    return grid


def _artifact(text: str) -> tuple[str, prec.Precision | None, str]:
    """BACKEND[:PRECISION]=PATH as (backend, precision or None, path): the option parsed."""
    name, _, path = text.partition("=")
    backend, _, precision = name.strip().partition(":")
    if not backend or not path:
        raise UsageError(f"--artifact wants BACKEND=PATH or BACKEND:PRECISION=PATH (litert=model.tflite), got {text!r}")
    return backend, prec.get(precision) if precision else None, path


def _artifact_cells(reg: Registry, given: list[tuple[str, prec.Precision | None, str]],
                    source: Source) -> dict[tuple[str, prec.Precision], str]:
    """(backend, precision) -> file for each --artifact: the precision named, else the one the file computes in;
    two files for one cell are one line."""
    cells: dict[tuple[str, prec.Precision], str] = {}
    for b, p, path in given:
        art = _read_artifact(reg, b, path, source)
        key = (b, p or art.precision)
        if key in cells:
            raise UsageError(f"--artifact: two files for {b} at {key[1].name} ({cells[key]}, {path}); name the "
                             f"precision of one ({b}:PRECISION=PATH)")
        cells[key] = str(Path(path).resolve())
    return cells


def _read_artifact(reg: Registry, backend: str, path: str, source: Source):
    """The file's declaration, read here, and the model's inputs matched to it: a mismatch is one line before any
    job. A routed backend's file is read by the same backend's class here (only its jobs run elsewhere)."""
    from fpdiff.backends import registry
    from fpdiff.runtime import artifacts
    cls = reg.cls(backend)
    local = registry(routed=False).create(cls.route.base) if cls.route is not None else reg.create(backend)
    if not local.implements("read_artifact"):
        can = [n for n in reg.names() if reg.cls(n).implements("read_artifact")]
        raise UsageError(f"{backend} runs no converted file of the user's; backends that do: {', '.join(can)}")
    art = artifacts.read(local, path)
    artifacts.order(source.input_names, source.inputs, art)
    return art


def _precisions(ps: list[prec.Precision], devices: Sequence[str], repeat: int) -> list[prec.Precision]:
    """The precisions asked for, once the devices and the repeat count are known to be sound."""
    if not ps:
        raise UsageError("no precision given")
    for d in devices:
        if d != "cpu" and not d.startswith("cuda"):
            raise UsageError(f"unknown device {d!r}; use cpu or cuda")
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    return ps


def _check_inputs(source: Source, allow_nonfinite: bool) -> None:
    """NaN or Inf in the inputs makes every metric meaningless: refused unless asked for."""
    for name, t in zip(source.input_names, source.inputs):
        a = t.numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if a.dtype.kind == "f" and not np.isfinite(a).all() and not allow_nonfinite:
            n = int(np.count_nonzero(~np.isfinite(a)))
            raise UsageError(f"input {name!r} has {n} non-finite values (NaN/Inf); metrics would be meaningless "
                             "- fix the inputs, or pass --allow-nonfinite to run anyway")


def _write_data(source: Source, run_dir: Path) -> str:
    """The job data every worker loads: inputs, their names, the fingerprint, and a torch model's weights."""
    return jobdata.of_source(run_dir / "source.pt", source)
