"""Which jobs a check runs: the cells asked for, each precision's baseline and the judge's cross-check, in the
order they run (the float64 reference first: nothing is judged without it). Bad input fails here, before any work."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import torch

from fpdiff.analysis.check import judge as judge_mod
from fpdiff.backends import Registry, judge_for
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.core.paths import cache_root
from fpdiff.model import graph
from fpdiff.model.graph import STATIC, ShapeVariant
from fpdiff.runtime import jobdata, rundir
from fpdiff.runtime.task import Job
from fpdiff.sources import Source, load

# (backend, device, precision, shape variant): a cell as the grid names it; results are keyed by the precision's name
Key = tuple[str, str, prec.Precision, ShapeVariant]
JobKey = tuple[str, str, str, ShapeVariant]


def job_key(k: Key) -> JobKey:
    """A cell's key among the results: its precision by name."""
    return (k[0], k[1], k[2].name, k[3])


@dataclass
class Grid:
    source: Source
    reg: Registry
    precisions: list[prec.Precision]
    cells: list[Key]
    judge_backend: str
    data_path: str
    plugins: tuple[str, ...] = ()
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # backend name -> its flags
    cache: str | None = None
    seed: int = 0
    repeat: int = 1
    # (backend, precision) -> the user's converted file that cell runs in place of the backend's own conversion
    artifacts: Mapping[tuple[str, str], str] = field(default_factory=dict)

    @property
    def baselines(self) -> dict[str, Key]:
        """Each precision's baseline: the judge's own code at that precision (on cuda where only cuda has it)."""
        return {p.name: (self.judge_backend, "cuda" if p.cuda_only else "cpu", p, STATIC) for p in self.precisions}

    @property
    def witness_variant(self) -> ShapeVariant:
        """The variant independent implementations are held against the judge on: the graph as the judge reads it,
        as written (an ONNX graph's symbolic dims left dynamic; a pinned graph can be refused where the model
        runs)."""
        if self.source.ref.kind == "onnx" and self.source.dynamic_shapes is not None:
            return ShapeVariant("dynamic", frozenset())
        return STATIC

    @property
    def judge_flags(self) -> tuple[str, ...]:
        """Flags that make the judge's fp64 job the float64 reference, run apart from its fp64 cell (base.py)."""
        return self.reg.cls(self.judge_backend).judge_flags

    def order(self) -> list[JobKey]:
        """Every job once, the float64 reference first (unless the judge runs it apart), then baselines, the
        judge's cross-check, the cells."""
        fp64 = [(self.judge_backend, "cpu", prec.get("fp64"), STATIC)] * (not self.judge_flags)
        checks = judge_mod.cross_check_jobs(self.source.ref.kind, self.judge_backend, prec.get("fp32"), STATIC,
                                            self.witness_variant)
        keys = [*fp64, *self.baselines.values(), *checks, *self.cells]
        return list(dict.fromkeys(job_key(k) for k in keys))

    @cached_property
    def cell_keys(self) -> set[JobKey]:
        """The cells' job keys, to tell a cell's job (repeated) from a baseline's."""
        return {job_key(k) for k in self.cells}

    def job(self, key: JobKey) -> Job:
        """The job of a key; a cell's runs `repeat` times (nondeterminism), the others once."""
        b, d, p, v = key
        n = self.repeat if key in self.cell_keys else 1
        artifact = self.artifacts.get((b, p)) if key in self.cell_keys else None
        return Job(self.source.ref, self.data_path, b, p, d, v, self.plugins, self.flags.get(b, ()), self.cache,
                   self.seed, n, artifact=artifact)

    def tolerance(self, p: prec.Precision) -> prec.Precision:
        """The precision with the spec's own tolerance, when it declares one."""
        over = self.source.tolerance.get(p.name)
        return prec.Precision(**{**p.__dict__, "tolerance": float(over)}) if over else p


def make_grid(model: str, reg: Registry, *, backends: Sequence[str], precisions: Sequence[str],
              devices: Sequence[str], shape_variants: Sequence[str] | None, load_args: dict, allow_nonfinite: bool,
              repeat: int, plugins: Sequence[str], flags: Mapping[str, tuple[str, ...]],
              cache_dir: str | None | bool, seed: int, artifacts: Sequence[str] = ()) -> Grid:
    """Check every argument, load the model, write its job data: the grid of cells to run. `artifacts`: the user's
    converted files, BACKEND[:PRECISION]=PATH, each run on its backend in place of that backend's own conversion."""
    given = [_artifact(a) for a in artifacts]
    backends = [*backends, *(b for b, _, _ in given if b not in backends)]
    for b in backends:
        reg.create(b)  # unknown names fail here, before any work
    ps = _precisions(precisions, devices, repeat)
    source = load(model, **load_args)
    _check_inputs(source, allow_nonfinite)
    for name in source.tolerance:
        prec.get(name)
    # an ONNX graph's symbolic dims are its exporter's default, not a declaration: static and dynamic by default
    # (the mixed variants on request, --shape-variants); a spec's dynamic_shapes() asks for every variant
    variants = graph.variants(source.dynamic_shapes, mixed=source.ref.kind != "onnx")
    if shape_variants:
        variants = [graph.find_variant(source.dynamic_shapes, v) for v in shape_variants]
    files = _artifact_cells(reg, given, source)
    converted = {b for b, _ in files}
    cells = [(b, d, p, v) for b in backends if b not in converted for d in devices for p in ps
             for v in (variants if reg.cls(b).shape_variants else [STATIC])]
    cells += [(b, "cpu", prec.get(p), STATIC) for b, p in files]
    ps += [p for p in dict.fromkeys(prec.get(p) for _, p in files) if p not in ps]  # each file's has its baseline
    data_path = _write_data(source, rundir.mkdtemp(prefix="fpdiff-check-"))
    cache = None if cache_dir is False else str(cache_dir or cache_root())
    return Grid(source, reg, ps, cells, judge_for(source.ref.kind), data_path, tuple(plugins), flags, cache, seed,
                repeat, files)


def _artifact(text: str) -> tuple[str, str | None, str]:
    """BACKEND[:PRECISION]=PATH as (backend, precision or None, path)."""
    name, _, path = text.partition("=")
    backend, _, precision = name.strip().partition(":")
    if not backend or not path:
        raise UsageError(f"--artifact wants BACKEND=PATH or BACKEND:PRECISION=PATH (litert=model.tflite), got {text!r}")
    if precision:
        prec.get(precision)
    return backend, precision or None, path


def _artifact_cells(reg: Registry, given: list[tuple[str, str | None, str]],
                    source: Source) -> dict[tuple[str, str], str]:
    """(backend, precision) -> file for each --artifact: the precision named, else the one the file computes in;
    two files for one cell are one line."""
    cells: dict[tuple[str, str], str] = {}
    for b, p, path in given:
        art = _read_artifact(reg, b, path, source)
        key = (b, prec.get(p or art.precision).name)
        if key in cells:
            raise UsageError(f"--artifact: two files for {b} at {key[1]} ({cells[key]}, {path}); name the precision "
                             f"of one ({b}:PRECISION=PATH)")
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


def _precisions(names: Sequence[str], devices: Sequence[str], repeat: int) -> list[prec.Precision]:
    """The precisions asked for, once the devices and the repeat count are known to be sound."""
    ps = [prec.get(p) for p in names]
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
