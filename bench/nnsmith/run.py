"""Runs NNSmith's fuzzer against ONNX Runtime for a fixed time and sorts its bug reports, as the rate to compare with.

Run it with the venv bench/nnsmith/setup.sh builds (it imports onnx from there):
    .venv-nnsmith/bin/python bench/nnsmith/run.py [--seconds 120] [--dtypes float16,float32|all] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

# Ops whose output moves in whole steps (an integer, an index, a bool) when their input is a float: a tiny rounding
# difference before one of them becomes a difference of 1 (a whole index, a flipped bool) after it: a rounding flip.
STEP_OPS = frozenset(
    {"Round", "Floor", "Ceil", "ArgMin", "ArgMax", "Sign", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"}
)
# ONNX TensorProto element types that hold integers: a Cast to one of them is a step (it truncates).
INT_ELEM_TYPES = frozenset({2, 3, 4, 5, 6, 7, 12, 13})
# ... and those that hold floats (float, float16, double, bfloat16): a Cast from one of them to an integer rounds.
FLOAT_ELEM_TYPES = frozenset({1, 10, 11, 16})
# NNSmith checks its time only between tests, and one test (an fp16 Conv on the CPU, seen here) can run for minutes:
# the fuzzer is stopped this long after its time, and only tests that ended within the time are counted.
DEADLINE_GRACE_S = 60
MISSING_KERNEL = re.compile(r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'")


@dataclass
class Report:
    """One bug folder NNSmith wrote: its symptom, stage, and the kind this script sorts it into."""

    name: str
    symptom: str
    stage: str
    kind: str
    key: str
    detail: str


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Reads the run's length, dtypes, seed and output folder."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=120, help="length of NNSmith's fuzzing loop (fuzz.time)")
    p.add_argument(
        "--dtypes",
        default="float16,float32",
        help="NNSmith dtypes for the graphs' tensors (mgen.dtype_choices), or 'all' for NNSmith's default",
    )
    p.add_argument("--seed", type=int, default=1, help="fuzz.seed: the same graphs in the same order on every run")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: a new temporary folder)")
    return p.parse_args(argv)


def fuzz_command(args: argparse.Namespace, out: Path) -> list[str]:
    """NNSmith's own CLI, ONNX models run by onnxruntime on the CPU, reports under out/reports."""
    cmd = [
        sys.executable, "-m", "nnsmith.cli.fuzz",
        "model.type=onnx", "backend.type=onnxruntime", "backend.target=cpu",
        f"fuzz.time={args.seconds}s", f"fuzz.seed={args.seed}",
        f"fuzz.root={out / 'reports'}", f"hydra.run.dir={out / 'hydra'}",
    ]  # fmt: skip
    if args.dtypes != "all":
        cmd.append(f"mgen.dtype_choices=[{args.dtypes}]")
    return cmd


def run_fuzz(args: argparse.Namespace, out: Path) -> tuple[str, float, bool, float]:
    """Runs the fuzzer, stopped at a deadline; its op probe (topset) starts from an empty cache in out/."""
    env = dict(os.environ, XDG_CACHE_HOME=str(out / "cache"))  # no stale topset cache from an earlier run counts
    log = out / "fuzz.stdout"
    start = time.monotonic()
    with log.open("w") as f:
        proc = subprocess.Popen(fuzz_command(args, out), stdout=f, stderr=subprocess.STDOUT, env=env)
        try:
            proc.wait(timeout=args.seconds + DEADLINE_GRACE_S)
            stopped = False
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            stopped = True
    # the fuzzer's CPU seconds: on a shared machine its wall-clock rate depends on the other load, its CPU time less so
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return log.read_text(errors="replace"), time.monotonic() - start, stopped, used.ru_utime + used.ru_stime


@dataclass
class Loop:
    """The fuzzing loop as its log tells it: when it began, and when each test ended and how long it took."""

    start: datetime
    ends: list[datetime]
    lengths_ms: list[float]

    def made_by(self, seconds: float) -> int:
        """Tests finished within the first `seconds` of the loop."""
        return sum((t - self.start).total_seconds() <= seconds for t in self.ends)


def stamp(s: str) -> datetime:
    """A timestamp of hydra's log format."""
    return datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f")


def read_loop(out: Path) -> Loop | None:
    """Reads the loop from hydra's log: its first [fuzz] line follows the topset probe; one Timing line per test."""
    text = (out / "hydra" / "fuzz.log").read_text(errors="replace")
    first = re.search(r"^\[([\d\- :,]+)\]\[fuzz\]", text, flags=re.M)
    if not first:
        return None
    timing = re.findall(r"^\[([\d\- :,]+)\]\[fuzz\]\[INFO\] - Timing: (.*)$", text, flags=re.M)
    lengths = [sum(float(v) for v in re.findall(r"([\d.]+)ms", rest)) for _, rest in timing]
    return Loop(stamp(first.group(1)), [stamp(t) for t, _ in timing], lengths)


def graph_facts(model_path: Path) -> tuple[list[str], dict[str, int]]:
    """The graph's op types and every value's element type (after shape inference), for sorting a report."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(model_path)))
    g = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    types.update({t.name: t.data_type for t in g.initializer})
    return [n.op_type for n in g.node], types


def step_ops(model_path: Path, types: dict[str, int]) -> list[str]:
    """The graph's whole-step ops on float values (STEP_OPS, and Casts to an integer type), in graph order."""
    import onnx

    found = []
    for n in onnx.load(str(model_path)).graph.node:
        # on an integer input (a shape's arithmetic, after Shape) these ops are exact: only a float input can flip
        if not n.input or types.get(n.input[0], 0) not in FLOAT_ELEM_TYPES:
            continue
        to = next((a.i for a in n.attribute if a.name == "to"), None)
        if n.op_type == "Cast" and to in INT_ELEM_TYPES:
            found.append("Cast(float->int)")
        elif n.op_type in STEP_OPS:
            found.append(n.op_type)
    return found


def sort_exception(folder: Path, err: str) -> tuple[str, str, str]:
    """A missing kernel is named by op and input dtype; any other exception by its last line."""
    import onnx

    m = MISSING_KERNEL.search(err)
    if not m:
        last = err.strip().splitlines()[-1][:160] if err.strip() else ""
        return "exception: other", last[:60], last
    op, node_name = m.group(1), m.group(3)
    _, types = graph_facts(folder / "model.onnx")
    node = next((n for n in onnx.load(str(folder / "model.onnx")).graph.node if n.name == node_name), None)
    elem = types.get(node.input[0], 0) if node is not None and node.input else 0
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem).name if elem else "?"
    return f"exception: missing {dtype} kernel", f"{op}({m.group(2)})", f"{op}({m.group(2)}) at {node_name}"


def sort_inconsistency(folder: Path, err: str) -> tuple[str, str, str]:
    """An output mismatch after a whole-step op is a rounding flip; others are grouped by output dtype and last op."""
    import onnx

    ops, types = graph_facts(folder / "model.onnx")
    steps = step_ops(folder / "model.onnx", types)
    at = re.search(r"eager at (\S+)", err)
    elem = types.get(at.group(1), 0) if at else 0
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem).name if elem else "?"
    mism = re.search(r"Mismatched elements: (\d+) / (\d+)", err)
    rel = re.search(r"Max relative difference among violations: (\S+)", err)
    detail = (f"{dtype} out, {mism.group(1) if mism else '?'}/{mism.group(2) if mism else '?'} elems, "
              f"max rel {rel.group(1) if rel else '?'}; ops {'>'.join(ops)}")  # fmt: skip
    if steps:
        return "inconsistency: after integer-step op", ",".join(sorted(set(steps))), detail
    return "inconsistency: other", f"{dtype} out, last op {ops[-1] if ops else '?'}", detail


def read_report(folder: Path) -> Report:
    """Reads one bug folder (meta.json, err.log, model.onnx) and sorts it."""
    meta = json.loads((folder / "meta.json").read_text())
    err = (folder / "err.log").read_text(errors="replace") if (folder / "err.log").exists() else ""
    symptom, stage = meta.get("symptom", "?"), meta.get("stage", "?")
    if symptom == "exception":
        kind, key, detail = sort_exception(folder, err)
    elif symptom == "inconsistency":
        kind, key, detail = sort_inconsistency(folder, err)
    else:
        kind = key = symptom
        detail = err.strip().splitlines()[-1][:160] if err.strip() else ""
    return Report(folder.name, symptom, stage, kind, key, detail)


def bug_number(folder: Path) -> int:
    """NNSmith numbers its bug folders in the order found (bug-<symptom>-<stage>-N)."""
    return int(folder.name.rsplit("-", 1)[-1])


def print_summary(
    args: argparse.Namespace, run: tuple[str, float, bool, float], out: Path, reports: list[Report]
) -> None:
    """The numbers to compare with: tests made, tests/s, reports, and the reports by kind and op."""
    text, wall, stopped, cpu = run
    loop = read_loop(out)
    print(f"output folder      {out}")
    print(f"dtypes             {args.dtypes}   seed {args.seed}")
    print(f"whole run          {wall:.1f} s wall, {cpu:.1f} s CPU (topset probe and start-up included)"
          + ("; the fuzzer overran its time and was stopped" if stopped else ""))  # fmt: skip
    if loop is None:
        print("the fuzzer's log shows no fuzzing loop: see fuzz.stdout in the output folder")
        return
    made = loop.made_by(args.seconds)
    print(f"tests made         {made} in the loop's first {args.seconds} s ({len(loop.ends)} in all)")
    print(f"tests/s            {made / args.seconds:.2f}")
    if loop.lengths_ms:
        slow = sorted(loop.lengths_ms)
        print(f"one test           median {slow[len(slow) // 2]:.0f} ms, slowest {slow[-1] / 1000:.1f} s")
    if stopped:
        last = (loop.ends[-1] - loop.start).total_seconds() if loop.ends else 0.0
        print(f"last test ended    {last:.1f} s into the loop; the test after it had not ended at the deadline"
              + (f" ({len(loop.ends) / last:.2f} tests/s until then)" if last else ""))  # fmt: skip
    print(f"failed to make     {text.count('`make_testcase` failed')} (generator errors, not counted as tests)")
    print(f"bug reports        {len(reports)}")
    for kind, n in Counter(r.kind for r in reports).most_common():
        print(f"  {n:4d}  {kind}")
        for key, m in Counter(r.key for r in reports if r.kind == kind).most_common():
            print(f"          {m:4d}  {key}")
    print("reports one by one:")
    for r in reports:
        print(f"  {r.name}: {r.kind}: {r.detail}")


def main(argv: list[str]) -> int:
    """Runs the fuzzer, then reads and prints its reports."""
    args = parse_args(argv)
    try:
        import nnsmith  # noqa: F401
    except ImportError:
        print("nnsmith is not importable here: run this with the venv bench/nnsmith/setup.sh built", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="nnsmith-ort-"))
    out.mkdir(parents=True, exist_ok=True)
    run = run_fuzz(args, out)
    folders = sorted((out / "reports").glob("bug-*"), key=bug_number)
    print_summary(args, run, out, [read_report(f) for f in folders])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
