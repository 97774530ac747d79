"""What one (backend, precision, device, shape variant) job sees: the model in the form each backend wants."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from fpdiff.core.precision import FP32, Precision, cast_inputs, dtype_name
from fpdiff.core.task import PROGRAM, TORCH
from fpdiff.model import graph
from fpdiff.model.graph import ShapeVariant
from fpdiff.runtime import jobdata
from fpdiff.runtime.cache import Cache
from fpdiff.sources import SourceRef


@dataclass(frozen=True)
class Job:
    """Picklable description of one cell, sent to a worker process."""
    source: SourceRef
    data_path: str  # torch.save'd {"state": state_dict, "inputs": tuple} (torch) or {"inputs": ...} (onnx)
    backend: str
    precision: Precision  # parsed once; the job protocol carries its name
    device: str
    variant: ShapeVariant
    plugins: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()  # extra backend flags (IREE compiler flags)
    cache_dir: str | None = None
    seed: int = 0
    repeat: int = 1  # runs of the prepared model; outputs after the first are compared bitwise (determinism)
    mode: str = "cell"  # "marked": the backend's prepare_marked (every float intermediate an output), not prepare_task
    artifact: str | None = None  # a converted file the backend runs as it is (prepare_artifact), not its own conversion


class LoadedSource:
    """The model rebuilt inside a worker; exports and ONNX files are memoized per worker and cached on disk."""

    def __init__(self, ref: SourceRef, data_path: str, seed: int) -> None:
        self.ref = ref
        data = jobdata.read(data_path)
        self.fingerprint: str = data["fingerprint"]
        self.inputs: tuple = tuple(torch.from_numpy(np.asarray(a)) if isinstance(a, np.ndarray) else a
                                   for a in data["inputs"])
        self.input_names: list[str] = data["input_names"]
        self.calibration: list[tuple] = [tuple(torch.as_tensor(np.asarray(a)) for a in c)
                                         for c in data.get("calibration") or ()]
        self.declared = None
        self.module: torch.nn.Module | None = None
        self.onnx = None  # the graph the judge reads: the opset conversion when there is one
        self.onnx_own = None  # the model's own graph when `onnx` is its conversion
        self.fixed_program: torch.export.ExportedProgram | None = None  # a `.pt2` program
        if ref.kind == PROGRAM and ref.path.endswith(".onnx"):  # an ONNX graph already at its precision
            from fpdiff.sources.onnx_file import read_model
            self.onnx = read_model(Path(ref.path))
        elif ref.kind == TORCH:
            from fpdiff.model import weights
            from fpdiff.sources.spec import build_model, import_spec
            mod = import_spec(Path(ref.path))
            self.module = weights.skeleton(lambda: build_model(mod, Path(ref.path), seed), data["state"])
            self.declared = mod.dynamic_shapes() if callable(getattr(mod, "dynamic_shapes", None)) else None
        elif ref.kind == PROGRAM:  # a torch.export program already at its precision (a segment, a plan trial)
            from fpdiff.sources.program import import_op_modules
            import_op_modules(ref.requires)
            self.fixed_program = torch.export.load(ref.path)
            for n in self.fixed_program.graph.nodes:  # save/load turns a multi-output op's list value into a
                if n.op == "call_function" and isinstance(n.meta.get("val"), tuple):  # tuple, which IREE's FX
                    n.meta["val"] = list(n.meta["val"])  # importer cannot type: restore what export produced
            self.module = self.fixed_program.module()
        else:
            from fpdiff.sources.onnx_file import read_model
            self.onnx = read_model(Path(ref.path))
            self.onnx_own = read_model(Path(ref.original)) if ref.original else None
        self._programs: dict = {}

    def program(self, precision: Precision, variant: ShapeVariant) -> torch.export.ExportedProgram:
        if self.fixed_program is not None:
            return self.fixed_program
        key = ((precision if precision.is_cast else FP32).name, variant.name)
        if key not in self._programs:
            self._programs[key] = graph.export(self.module, self.inputs, precision, variant, self.declared)
        return self._programs[key]

    def autocast_program(self, precision: Precision, device: str,
                         variant: ShapeVariant) -> torch.export.ExportedProgram:
        """The model's autocast graph for this device's policy (model/autocast.py): what a backend without torch's
        dispatcher runs for an amp-* cell."""
        from fpdiff.model import autocast
        key = (precision.name, autocast.device_type(device), variant.name)
        if key not in self._programs:
            self._programs[key] = autocast.mixed_program(self.module, self.inputs, precision.autocast, device,
                                                         variant.as_dynamic_shapes(self.declared))
        return self._programs[key]


def _versions() -> str:
    """Versions of everything that turns a model into an artifact: a new exporter or compiler means a new key."""
    from fpdiff.core.versions import versions
    return ",".join(f"{k}={v}" for k, v in versions(("torch", "onnx", "onnxscript", "iree-base-compiler")).items())


@dataclass
class Task:
    """Handed to a backend's prepare_task: everything about the cell, nothing about verdicts (the contract backends
    see is core.task.Task)."""
    source: LoadedSource
    precision: Precision
    device: str
    variant: ShapeVariant
    cache: Cache
    flags: tuple[str, ...] = ()
    converted: bool = False  # run the opset conversion: the model's own graph failed on this backend (worker)
    made: dict = field(default_factory=dict)  # what fpdiff did making the cell's graph, for the cell's info
    given: str | None = None  # a quantized cell's own quantized file (the user's), run as it is
    _memo: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.source.ref.kind

    @property
    def is_torch(self) -> bool:
        """A torch model, or a `.pt2` program."""
        return self.kind == TORCH or self.source.fixed_program is not None

    @property
    def is_program(self) -> bool:
        return self.kind == PROGRAM

    def inputs(self) -> tuple:
        """Inputs as the backend receives them: float inputs in the precision's dtype (fp32 under autocast); each a
        copy of its own, so a backend that writes into its inputs changes no other cell's (the worker says it did)."""
        if self.precision.is_cast:
            return tuple(t.clone() for t in cast_inputs(self.source.inputs, self.precision))
        return tuple(t.to(torch.float32, copy=True) if t.is_floating_point() else t.clone()
                     for t in self.source.inputs)

    def calibration(self) -> list[tuple]:
        """The calibration inputs of a quantized cell (the job data's), float ones as float32."""
        return [tuple(t.float() if t.is_floating_point() else t for t in c) for c in self.source.calibration]

    def calibration_digest(self) -> str:
        """A digest of the calibration inputs: with the model and format, what names a cached quantized artifact."""
        import hashlib
        h = hashlib.sha256()
        for c in self.calibration():
            for t in c:
                h.update(np.ascontiguousarray(t.numpy()).tobytes())
        return h.hexdigest()[:16]

    def program(self) -> torch.export.ExportedProgram:
        """The program a backend compiles. Under autocast it is the autocast graph: an exported program cannot
        carry torch's dispatch policy, so backends that run programs get that policy written into the graph (casts
        at the borders of the ops autocast runs in float32); module() is for backends that enter autocast."""
        if not self.is_torch:
            raise TypeError(f"a {self.kind} model has no torch program")  # a backend's bug: it did not ask is_torch
        if self.precision.autocast is not None and self.kind == TORCH:
            return self.source.autocast_program(self.precision, self.device, self.variant)
        return self.source.program(self.precision, self.variant)

    def module(self, streamed: bool = False) -> torch.nn.Module:
        if self.source.module is None:
            raise TypeError(f"a {self.kind} model has no torch module")  # a backend's bug: it did not ask is_torch
        if self.is_program:  # fixed dtypes already (a segment at P, a mixed-precision plan)
            import copy
            return copy.deepcopy(self.source.module)
        return graph.cast_module(self.source.module, self.precision, streamed and self._large_cast())

    def _large_cast(self) -> bool:
        """Cast per op: always at float64 (the judge: twice the fp32 weights whole), and wherever the cast copy
        would pass model/weights.py's LAZY_CAST_BYTES."""
        from fpdiff.model.weights import cast_is_large
        p = self.precision
        return p.is_cast and (p.dtype == torch.float64 or cast_is_large(self.source.module, p.dtype))

    def dynamic_dims(self) -> list[list[int]]:
        return graph.dynamic_dims(self.source.declared, list(self.source.input_names), self.variant)

    def at(self, precision: Precision) -> Task:
        return dataclasses.replace(self, precision=precision, _memo={})

    def key(self, *extra: str) -> tuple[str, ...]:
        """Cache key parts for an artifact of this cell: model content, precision, variant, versions, flags."""
        p = self.precision.name
        if self.precision.autocast is not None:  # the graph follows the device's autocast lists (model/autocast.py)
            from fpdiff.model import autocast
            p = f"{p}:{autocast.device_type(self.device)}:{autocast.digest()}"
        # a cell on the opset conversion (after its own graph failed) builds its artifacts from another graph
        graph = ("opset-conversion",) if self.converted and self.source.onnx_own is not None else ()
        return (self.source.fingerprint, p, self.variant.name, _versions(), " ".join(self.flags), *graph, *extra)

    def onnx_file(self, judge: bool = False) -> Path:
        """An ONNX graph of the model at this precision: exported from the cast program, or the source cast. Of an
        ONNX source, backends get the model's own graph (what the user deploys); the judge (`judge`), and a backend
        the own graph failed on (`converted`), its opset conversion (sources/opset.py)."""
        key = ("onnx", self.own_graph(judge), judge)
        if key not in self._memo:
            self._memo[key] = _onnx_for(self, self.own_graph(judge), judge)
        return self._memo[key]

    def own_graph(self, judge: bool = False) -> bool:
        """Whether this cell runs the ONNX model's own graph rather than its opset conversion."""
        return self.source.onnx_own is not None and not (judge or self.converted)

    def can_fall_back(self) -> bool:
        """True when the cell ran the model's own graph and an opset conversion of it exists to try next."""
        return self.own_graph()

    def source_onnx(self, judge: bool = False):
        """(ModelProto, file) of the ONNX source graph this cell runs, before any cast."""
        if self.own_graph(judge):
            return self.source.onnx_own, Path(self.source.ref.original)
        return self.source.onnx, Path(self.source.ref.path)

    @property
    def requested_dtype(self) -> str:
        """The dtype arithmetic was asked to run in: the low dtype of an autocast cell, whose weights stay fp32."""
        return dtype_name(self.precision.autocast or self.precision.dtype)


def _onnx_for(task: Task, own: bool = False, judge: bool = False) -> Path:
    """The cell's ONNX graph, cached: exported from the cast torch program, or the ONNX source (its own graph when
    `own`, else its opset conversion) cast, its dims pinned for a static cell (never the judge's: the reference
    evaluator runs the graph as written, whatever the shapes); an `.onnx` program as written."""
    import onnx

    from fpdiff.core.errors import ONNX_EXPORT, stage
    from fpdiff.onnxtools.export import ONNX_TYPE, save_export_info
    if task.is_program and not task.is_torch:
        return Path(task.source.ref.path)
    if task.is_torch:
        made: dict = {}
        # "exporter-choice" in the key: artifacts from before the fallback have no record of their exporter;
        # "float64-checked-v2": float64 exports from before the check (onnxtools/export.py) carry no departure
        key = task.key("onnx-export", "exporter-choice", "float64-checked-v2", "bf16-opset22")
        path = task.cache.get_or_build(*key, suffix=".onnx",
                                       build=lambda p: made.update(_export_task(task, p)))[0]
        if made:
            save_export_info(path, made)
        return path
    model = task.source_onnx(judge=not own)[0]
    if not judge:
        model = _pinned(task, model)
    graph = ("own-graph",) if own else ()
    graph += ("pinned-dims-v2",) if not judge else ("as-written",)  # static cells pin their dims (task.made says so)
    if not task.precision.is_cast:  # autocast: the source graph with autocast's float32 ops kept (model/autocast.py)
        from fpdiff.model.autocast import mixed_onnx

        def build(p: Path) -> None:
            with stage(ONNX_EXPORT, "onnx"):  # shape inference on the source graph is what can fail here
                m = mixed_onnx(model, task.precision.autocast, task.device)
            onnx.save(checked(model, m, task.precision.name), str(p))
        return task.cache.get_or_build(*task.key("onnx-autocast", "typed", *graph), suffix=".onnx", build=build)[0]
    target = ONNX_TYPE[task.requested_dtype]
    if target == onnx.TensorProto.BFLOAT16:  # opsets before 22 have no bfloat16 Conv, LSTM, pooling or norms
        path = task.cache.get_or_build(*task.key("onnx-cast", "typed", "bf16-opset22", *graph), suffix=".onnx",
                                       build=lambda p: _cast_bf16(task, model, p))[0]
        from fpdiff.onnxtools.export import export_info
        task.made.update(export_info(path))
        return path
    return task.cache.get_or_build(*task.key("onnx-cast", "typed", *graph), suffix=".onnx",
                                   build=lambda p: onnx.save(cast_checked(model, target), str(p)))[0]


def _cast_bf16(task: Task, model, path: Path) -> None:
    """The bf16 cell's graph: the model at opset 22 when onnx's converter makes one that reproduces it (checked as
    the judge's conversion is), else at its own opset, the reason kept beside the file for every cell to report."""
    import onnx

    from fpdiff.onnxtools.export import save_export_info
    from fpdiff.sources.opset import for_bfloat16
    feeds = {n: np.asarray(t) for n, t in zip(task.source.input_names, task.source.inputs)}
    converted, note = for_bfloat16(model, feeds)
    onnx.save(cast_checked(converted, onnx.TensorProto.BFLOAT16), str(path))
    if note.get("status") == "kept original":
        save_export_info(path, {"bf16_graph": f"cast at the model's own opset {note.get('opset')}, not 22: "
                                              f"{note.get('reason')} (ops without bfloat16 there stay float32)"})


def _pinned(task: Task, model):
    """The ONNX graph with the dims the cell's shape variant holds static pinned to the inputs' sizes: a static cell
    hands every backend a graph whose dims are all known (as a user deploying fixed shapes does), a dynamic cell the
    graph as written."""
    from fpdiff.onnxtools.shapes import pin_dims, symbolic_dims
    found = symbolic_dims(model)
    if not found:
        return model
    static = task.variant.static
    keep = set() if static is None else {d for dims in found.values() for d in dims.values() if d not in static}
    shapes = {n: tuple(t.shape) for n, t in zip(task.source.input_names, task.source.inputs)}
    pinned = pin_dims(model, shapes, keep)
    from fpdiff.onnxtools.mixed import type_error
    why = type_error(pinned)
    if why is not None and type_error(model) is None:  # fpdiff's rewrite must never fail where the model does not
        task.made["onnx_shapes"] = (f"as written (dynamic dims): with the dims pinned to the inputs' sizes the graph "
                                    f"fails ONNX's full type check ({why[:300]})")
        return model
    if keep != {d for dims in found.values() for d in dims.values()}:
        but = f" except {', '.join(sorted(keep))}" if keep else ""
        task.made["onnx_shapes"] = f"pinned to the inputs' sizes{but}"
    return pinned


def cast_checked(model, target: int):
    """The source cast to `target`, refused where its opset has no such type (bfloat16 before opset 13), and
    checked: every graph fpdiff hands a backend passes ONNX's full type check, or the failure is fpdiff's (or the
    model's own, when its graph fails the check already), never the backend's."""
    from onnx import TensorProto

    from fpdiff.core.errors import CAST, Unsupported
    from fpdiff.onnxtools.mixed import cast_model
    from fpdiff.sources.opset import default_opset
    opset = default_opset(model)
    if target == TensorProto.BFLOAT16 and opset < 13:
        raise Unsupported(f"the model's opset {opset} has no bfloat16 type (ONNX added it in opset 13)",
                          dtype="bfloat16", stage=CAST, component=f"onnx opset {opset}")
    return checked(model, cast_model(model, target), TensorProto.DataType.Name(target).lower())


def checked(model, made, what: str):
    """`made` (fpdiff's graph from `model`) when it passes ONNX's full type check; else whose failure it is."""
    from fpdiff.core.errors import CAST, StageError
    from fpdiff.onnxtools.mixed import type_error
    why = type_error(made)
    if why is None:
        return made
    own = type_error(model)
    if own is not None:
        raise StageError(CAST, "the model", f"the model's own graph fails ONNX's full type check: {own}")
    raise StageError(CAST, "fpdiff", f"fpdiff's {what} graph fails ONNX's full type check: {why}")


def _export_task(task: Task, path: Path) -> dict:
    """The cell's program exported, with the cell's own nn.Module, inputs and dynamic dims for the fallback."""
    from fpdiff.core.errors import TORCH_EXPORT, stage
    from fpdiff.onnxtools.export import export_program
    with stage(TORCH_EXPORT, "torch.export"):
        program = task.program()
    names = list(task.source.input_names)
    dims = task.dynamic_dims()
    axes = {n: {d: f"{n}_{d}" for d in ds} for n, ds in zip(names, dims) if ds}
    # the fallback traces a module: under autocast the autocast graph's own (the plain module would export fp32)
    module = task.module if task.precision.is_cast else None
    return export_program(program, path, module=module, args=task.inputs(), input_names=names,
                          dynamic_axes=axes or None)
