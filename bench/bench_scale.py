"""Peak memory and wall time of fpdiff's analyses on real-size models, over the whole process tree.

Run: .venv/bin/python bench/bench_scale.py --size 0.4b [--analysis check|locate|plan] [--precisions fp32,bf16]
       [--fpdiff "python -m fpdiff"] [--plant N]
Samples every process of the tree 10 times a second: the sum of RSS (what `top` shows; pages shared between
processes counted once per process) and the sum of PSS (proportional set size: a page shared by N processes counts
1/N in each, so the sum is the physical memory the tree holds). Ratios are against the model's fp32 weights.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

SPEC = Path(__file__).parent / "specs" / "scale" / "llama.py"



def count_params(size: str) -> int:
    """Parameters of the spec at `size`, counted on the meta device (nothing allocated)."""
    code = ("import os,sys,torch,importlib.util as u;os.environ['FPDIFF_BENCH_SIZE']=sys.argv[1];"
            f"s=u.spec_from_file_location('m','{SPEC}');m=u.module_from_spec(s);s.loader.exec_module(m)\n"
            "with torch.device('meta'): print(sum(p.numel() for p in m.model().parameters()))")
    return int(subprocess.run([sys.executable, "-c", code, size], capture_output=True, text=True,
                              check=True).stdout.strip())


def _pss(p: psutil.Process) -> tuple[int, int]:
    try:
        m = p.memory_full_info()
        return m.rss, m.pss
    except (psutil.Error, AttributeError):
        return 0, 0


def watch(proc: subprocess.Popen, peaks: dict, stop: threading.Event) -> None:
    """Peak RSS-sum and PSS-sum of the tree rooted at `proc`, sampled until `stop`."""
    root = psutil.Process(proc.pid)
    while not stop.is_set():
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        rss = pss = 0
        biggest = 0
        for p in tree:
            r, s = _pss(p)
            rss, pss, biggest = rss + r, pss + s, max(biggest, r)
            who = peaks.setdefault("by_process", {})
            who[p.pid] = max(who.get(p.pid, 0), s)
        peaks["rss"] = max(peaks.get("rss", 0), rss)
        peaks["pss"] = max(peaks.get("pss", 0), pss)
        peaks["one"] = max(peaks.get("one", 0), biggest)
        peaks["procs"] = max(peaks.get("procs", 0), len(tree))
        time.sleep(0.1)


def run(cmd: list[str], env: dict) -> dict:
    """Wall time, exit code and peak memory of one command."""
    peaks: dict = {}
    stop = threading.Event()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t = threading.Thread(target=watch, args=(proc, peaks, stop), daemon=True)
    t.start()
    out, err = proc.communicate()
    stop.set()
    t.join()
    return {"wall_s": time.perf_counter() - t0, "rc": proc.returncode, "stdout": out[-4000:], "stderr": err[-4000:],
            **peaks}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="0.4b")
    ap.add_argument("--analysis", default="check", choices=["check", "locate", "plan"])
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--fpdiff", default=f"{sys.executable} -m fpdiff")
    ap.add_argument("--plant", default=None, help="layer whose MLP output overflows fp16 (FPDIFF_BENCH_PLANT)")
    ap.add_argument("--extra", default="--quiet", help="more arguments for the fpdiff command")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    n = count_params(a.size)
    weights = n * 4
    env = dict(os.environ, FPDIFF_BENCH_SIZE=a.size)
    if a.plant is not None:
        env["FPDIFF_BENCH_PLANT"] = a.plant
    report = Path(tempfile.mkdtemp(prefix="bench-scale-")) / "report.json"
    cmd = shlex.split(a.fpdiff) + [a.analysis, str(SPEC)]
    if a.analysis == "check":
        cmd += ["--backends", "torch", "--precisions", a.precisions, "--json", str(report)]
    else:
        cmd += ["--backend", "torch", "--precision", a.precisions.split(",")[-1], "--json", str(report)]
    cmd += shlex.split(a.extra)
    r = run(cmd, env)
    r["report"] = json.loads(report.read_text()) if report.exists() else None
    gb = 1024 ** 3
    row = {"size": a.size, "params": n, "fp32_weights_gb": weights / gb, "analysis": a.analysis,
           "precisions": a.precisions, "wall_s": round(r["wall_s"], 1), "rc": r["rc"],
           "peak_pss_gb": r.get("pss", 0) / gb, "peak_rss_sum_gb": r.get("rss", 0) / gb,
           "peak_one_process_gb": r.get("one", 0) / gb, "processes": r.get("procs", 0),
           "pss_over_weights": r.get("pss", 0) / weights, "rss_sum_over_weights": r.get("rss", 0) / weights,
           "one_over_weights": r.get("one", 0) / weights,
           "peak_pss_by_process_gb": [round(v / gb, 2) for v in r.get("by_process", {}).values()],
           "command": " ".join(cmd)}
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}))
    if r["rc"] not in (0, 1):
        print(r["stderr"][-2000:], file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps({**row, "report": r["report"], "stdout": r["stdout"],
                                            "stderr": r["stderr"]}, indent=1))


if __name__ == "__main__":
    main()
