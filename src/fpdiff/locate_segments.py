"""locate on any backend (ort, iree, inductor, plugins): bisect over standalone segments of the graph, each
compiled and run by the backend on float64-run inputs, judged like a check cell against torch eager."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import compare, graph, precision as prec, segments
from .errors import UsageError
from .sources import SourceRef, digest
from .task import Job
from .worker import OK, WorkerPool


@dataclass
class SegmentVerdict:
    start: int
    end: int
    status: str  # a compare verdict, or crash/unsupported/timeout from the worker
    reason: str
    ops: list[str] = field(default_factory=list)
    outputs: list | None = None  # the backend's outputs, kept for short segments (the repro bundle's)
    baseline_rel_l2: float = 0.0


def _np(x) -> np.ndarray:
    return x.detach().double().numpy() if x.is_floating_point() else x.numpy()


class Bisector:
    """Asks the backend about segments [start, end) of op units; remembers every answer (one compile each)."""

    def __init__(self, module: torch.nn.Module, inputs: tuple, p: prec.Precision, backend: str, device: str,
                 plugins: tuple[str, ...], flags: tuple[str, ...], timeout: float, cache: str | None) -> None:
        if not p.is_cast:
            raise UsageError("locate on compiled backends takes whole-model precisions (fp32, fp16, bf16, fp64)")
        self.p, self.backend, self.device = p, backend, device
        self.plugins, self.flags, self.timeout, self.cache = plugins, flags, timeout, cache
        gm64 = graph.export(module, inputs, prec.get("fp64"), graph.STATIC, None).module()
        self.gmp = graph.export(module, inputs, p, graph.STATIC, None).module()
        if [str(n.target) for n in gm64.graph.nodes] != [str(n.target) for n in self.gmp.graph.nodes]:
            raise UsageError(f"the float64 and {p.name} exports of this model differ in structure")
        self.v64 = segments.values(gm64, tuple(t.double() if t.is_floating_point() else t for t in inputs))
        self.units = segments.units(self.gmp)
        self.asked: dict[tuple[int, int], SegmentVerdict] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="fpdiff-locate-"))
        self.pool = WorkerPool()

    def close(self) -> None:
        self.pool.close()

    def segment(self, start: int, end: int):
        """The segment as a program at P, its inputs (float64-run values cast), float64 expected outputs and
        torch eager's outputs at P."""
        nodes = [n for u in self.units[start:end] for n in u]
        sub, in_names, out_names = segments.cut(self.gmp, nodes)
        ins = []
        for name in in_names:
            v, node = self.v64[name], next(n for n in self.gmp.graph.nodes if n.name == name)
            if not isinstance(v, torch.Tensor):
                raise UsageError(f"segment input {name} is not a tensor ({type(v).__name__})")
            want = node.meta["val"].dtype if isinstance(node.meta.get("val"), torch.Tensor) else v.dtype
            ins.append(v.to(want) if v.is_floating_point() else v)
        expected = [_np(self.v64[n]) for n in out_names]
        with torch.no_grad():
            eager = [_np(t) for t in sub(*ins)]
        program = torch.export.export(sub, tuple(ins), strict=False)
        return nodes, program, ins, in_names, expected, eager

    def verdict(self, start: int, end: int) -> SegmentVerdict:
        if (start, end) in self.asked:
            return self.asked[(start, end)]
        nodes, program, ins, in_names, expected, eager = self.segment(start, end)
        path = self.dir / f"segment-{start}-{end}.pt2"
        torch.export.save(program, str(path))
        data = self.dir / f"segment-{start}-{end}.inputs.pt"
        torch.save({"fingerprint": digest(path.read_bytes()), "inputs": tuple(ins), "input_names": in_names}, data)
        job = Job(SourceRef("program", str(path), f"ops {start}..{end - 1}"), str(data), self.backend,
                  self.p.name, self.device, graph.STATIC, self.plugins, self.flags, self.cache)
        r = self.pool.run(job, self.timeout)
        ops = [str(n.target) for n in nodes]
        if r.status != OK:
            v = SegmentVerdict(start, end, r.status, r.message, ops)
        else:
            m = compare.measure(expected, r.outputs, self.p.compute)
            base = compare.measure(expected, eager, self.p.compute)
            j = compare.judge(m, self.p, base)
            v = SegmentVerdict(start, end, j.status, j.reason, ops, r.outputs if end - start <= 4 else None,
                               base.rel_l2)
        self.asked[(start, end)] = v
        return v

    def fails(self, start: int, end: int) -> bool:
        return self.verdict(start, end).status in (compare.MISMATCH, "crash", "error", "unsupported", "timeout")

    def bisect(self) -> SegmentVerdict | None:
        """Smallest failing segment: the shortest failing prefix fixes its end, then the latest start that
        still fails fixes its beginning. About 2*log2(ops) compiles."""
        n = len(self.units)
        if n == 0 or not self.fails(0, n):
            return None
        lo, hi = 1, n
        while lo < hi:
            mid = (lo + hi) // 2
            if self.fails(0, mid):
                hi = mid
            else:
                lo = mid + 1
        end = lo
        lo, hi = 0, end - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.fails(mid, end):
                lo = mid
            else:
                hi = mid - 1
        return self.verdict(lo, end)

    def where(self, unit: int) -> tuple[str, str, str]:
        from .locate import _where
        node = self.units[unit][0]
        path, src = _where(node)
        return str(node.target), path, src

    def unit_of(self, node_name: str) -> int:
        return next(i for i, u in enumerate(self.units) if any(n.name == node_name for n in u))

    def bundle(self, start: int, end: int, out: Path, *, limit: float, baseline_rel_l2: float,
               backend_out: list | None, plugin_file: str | None) -> Path:
        from . import repro
        from .check import versions
        nodes, program, ins, _, expected, _ = self.segment(start, end)
        kind = self.backend if self.backend in ("torch", "inductor", "ort", "iree") else "plugin"
        flags = []
        if kind == "iree":
            from .backends.iree import compile_flags
            flags = compile_flags(self.device, self.p.name, self.flags)
        title = f"{self.backend} at {self.p.name}, ops {start}..{end - 1}: {', '.join(str(n.target) for n in nodes)}"
        return repro.write(out, title=title, backend=self.backend, kind=kind, precision=self.p, device=self.device,
                           program=program, inputs=ins, expected=expected, backend_out=backend_out,
                           baseline_rel_l2=baseline_rel_l2, limit=limit, flags=flags, plugin_file=plugin_file,
                           versions=versions())
