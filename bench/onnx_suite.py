"""The ONNX backend test suite's node cases through `fpdiff check`: each case's graph with the case's own inputs on
ONNX Runtime, IREE and OpenVINO at fp32 and fp16, and fpdiff's float64 judge held against the suite's expected
outputs, so fpdiff's tracebacks, false verdicts and misattributed failures are counted on graphs nobody here wrote.

Run: .venv/bin/python bench/onnx_suite.py [--set shipped|node] [--cases REGEX] [--limit N] [--all]
                                          [--backends ort,iree,openvino] [--precisions fp32,fp16] [--budget S]
                                          [--json out.json] [--md out.md] [--work DIR] [--from-json A.json,B.json]
Two sets. `shipped` (default): the 140 cases the wheel ships as files with data, onnx/backend/test/data/
{pytorch-converted,pytorch-operator,simple}/*/ (model.onnx, test_data_set_0/input_*.pb, output_*.pb), 34 of them
opset 6: the "140 ONNX backend test cases" of the issue. `node`: the node cases from
`onnx.backend.test.case.node.collect_testcases` (the wheel generates them; it ships no node/ directory), sampled
as below. Each case: model, inputs and expected outputs. Each case is written as model.onnx, inputs.npz (graph input
names) and expected.npz, and checked by the CLI (`python -m fpdiff check model.onnx --inputs inputs.npz`, a
subprocess with a timeout: one case at a time, nothing in parallel; `--repeat 1`, since determinism is not what
the suite measures and a second run of each cell would double the runs). The fpdiff that runs is whatever
`python -m fpdiff` imports (PYTHONPATH picks another tree; the report records its path).

Node sample (documented, deterministic): the node cases with one data set of plain tensors and at least one
floating-point input or output (where precision can matter), without the `_expanded` function expansions (the
same op again), sorted by name, every Nth with N chosen so about 140 remain. `--all` takes every case with one
data set of plain tensors; `--cases` filters by a regular expression on the name first.

Judge against expected: the plugin backend `suite-expected` (bench/suite_expected_backend.py) answers each cell with
the suite's expected outputs; its fp32 cell's error against fpdiff's float64 judge is the judge's distance from
the suite. They agree when the relative L2 is within the case's rtol (1e-3 by default, the suite's own) or the
worst absolute difference within its atol. Its cells are not counted among the backends' cells.

Ground truth for the counts, from the backend itself: when an fp32 cell is not a pass (unsupported, error, crash,
timeout, mismatch), the backend is run directly on the case's original graph and inputs (ORT's InferenceSession,
iree-import-onnx + iree-compile + iree.runtime, OpenVINO's compile_model with an f32 hint; a subprocess each).
- false unsupported: fpdiff says unsupported and the backend runs the original graph;
- misattributed: fpdiff charges an error or crash to the backend and the backend runs the original graph (the
  graph fpdiff handed over was broken by its own conversion or cast), or the backend's message says the graph it
  was given is invalid, or one backend's failure at one stage is `unsupported` at one precision and `error` at
  the other;
- false mismatch: an fp32 mismatch where the backend's direct output matches the suite's expected outputs within
  fp32's tolerance (1e-5 relative L2);
- an fp16 failure where the same backend ran the graph at fp32 cannot be checked this way (the original graph is
  fp32): listed as `low-precision failure (unverified)`, not counted as false.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from corpus import INVALID_GRAPH, fpdiff_cli, run_killable  # noqa: E402 (bench/ is not a package)

BACKENDS = ("ort", "iree", "openvino")
PRECISIONS = ("fp32", "fp16")
SAMPLE = 140  # the count of ONNX backend test cases
WITNESS = "suite-expected"
FAILED = ("unsupported", "error", "crash", "timeout", "mismatch")
# The backend on the original graph, fp32, the case's inputs: does it run, and how far from the expected outputs?
PROBE = r'''
import json, subprocess, sys, tempfile
from pathlib import Path
import numpy as np
backend, case = sys.argv[1], Path(sys.argv[2])
feeds = dict(np.load(case / "inputs.npz"))
z = np.load(case / "expected.npz")
expected = [z[k] for k in sorted(z.files, key=lambda k: int(k.split("_", 1)[0]))]
try:
    if backend == "ort":
        import onnxruntime as ort
        outs = ort.InferenceSession(str(case / "model.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)
    elif backend == "openvino":
        import openvino as ov
        m = ov.Core().compile_model(str(case / "model.onnx"), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
        r = m(feeds)
        outs = [r[o] for o in m.outputs]
    else:
        import onnx
        import iree.runtime as rt
        bin = Path(sys.executable).parent
        d = Path(tempfile.mkdtemp())
        for cmd in ([str(bin / "iree-import-onnx"), str(case / "model.onnx"), "-o", str(d / "m.mlir")],
                    [str(bin / "iree-compile"), str(d / "m.mlir"), "--iree-hal-target-device=local",
                     "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
                     "-o", str(d / "m.vmfb")]):
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode:
                raise RuntimeError(Path(cmd[0]).name + ": " + " ".join((p.stderr or p.stdout).split())[:400])
        mod = rt.load_vm_flatbuffer_file(str(d / "m.vmfb"), driver="local-task")
        fn = [n for n in mod.vm_module.function_names if not n.startswith("__") and not n.endswith("$async")][0]
        g = onnx.load(str(case / "model.onnx")).graph
        init = {i.name for i in g.initializer}
        names = [i.name for i in g.input if i.name not in init]
        outs = mod[fn](*[feeds[n] for n in names])
        outs = [o.to_host() for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
except Exception as e:
    print(json.dumps({"ran": False, "message": f"{type(e).__name__}: {' '.join(str(e).split())[:400]}"}))
    sys.exit(0)
num = den = 0.0
exact = True
for o, e in zip(outs, expected):
    o, e = np.asarray(o), np.asarray(e)
    if o.shape != e.shape:
        print(json.dumps({"ran": True, "rel_l2": None, "message": f"shape {o.shape} != expected {e.shape}"}))
        sys.exit(0)
    if e.dtype.kind in "fc":
        d = o.astype(np.float64) - e.astype(np.float64)
        d[np.isnan(o) & np.isnan(e)] = 0
        num += float(np.sum(d * d)); den += float(np.sum(e.astype(np.float64) ** 2))
    else:
        exact = exact and bool(np.array_equal(o, e))
rel = (num ** 0.5 / den ** 0.5) if den else (0.0 if num == 0 else float("inf"))
print(json.dumps({"ran": True, "rel_l2": rel if np.isfinite(rel) else None, "exact_non_float": exact}))
'''


@dataclass
class ShippedCase:
    """A case the wheel ships as files (model.onnx, test_data_set_0/input_*.pb and output_*.pb)."""
    name: str
    model: object
    data_sets: list
    rtol: float = 1e-3  # the suite's defaults (onnx.backend.test.runner)
    atol: float = 1e-7


def shipped_cases() -> list:
    """The 140 cases the onnx wheel ships with data (pytorch-converted 82, pytorch-operator 35, simple 23), many of
    them old opsets (6-9): the set the issue counted."""
    import onnx
    root = Path(onnx.__file__).parent / "backend" / "test" / "data"
    out = []
    for d in sorted(p for sub in ("pytorch-converted", "pytorch-operator", "simple") for p in (root / sub).iterdir()
                    if (p / "model.onnx").exists()):
        ins, outs = (_read_pbs(d / "test_data_set_0", kind) for kind in ("input", "output"))
        out.append(ShippedCase(f"{d.parent.name}/{d.name}", onnx.load(str(d / "model.onnx")), [(ins, outs)]))
    return out


def _read_pbs(ds: Path, kind: str) -> list:
    """input_0.pb, input_1.pb, ... as arrays, in index order."""
    import onnx
    from onnx import numpy_helper
    files = sorted(ds.glob(f"{kind}_*.pb"), key=lambda f: int(f.stem.split("_")[1]))
    return [numpy_helper.to_array(onnx.load_tensor(str(f))) for f in files]


def all_cases() -> list:
    """The suite's node cases, generated by the wheel (about 1,900; ~8 s)."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sorted(collect_testcases(None), key=lambda c: c.name)


def plain(case) -> bool:
    """One data set of plain tensors in and out (no sequences, optionals or maps): what --inputs npz can hold."""
    if not case.data_sets or len(case.data_sets) != 1:
        return False
    ins, outs = case.data_sets[0]
    return all(isinstance(x, np.ndarray) and x.dtype.kind != "O" for x in list(ins) + list(outs))


def floating(case) -> bool:
    ins, outs = case.data_sets[0]
    return any(x.dtype.kind == "f" for x in list(ins) + list(outs))


def sample(cases: list, n: int = SAMPLE) -> list:
    """The default sample: floating-point cases, no function expansions, every Nth by name (~n of them)."""
    pool = [c for c in cases if plain(c) and floating(c) and not c.name.endswith("_expanded")]
    step = max(1, math.ceil(len(pool) / n))
    return pool[::step]


def spaced(items: list, n: int) -> list:
    """At most n items, evenly spaced (deterministic), so a short run still spans the alphabet of ops."""
    if n >= len(items):
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


def materialize(case, d: Path) -> dict:
    """model.onnx, inputs.npz (by graph input name) and expected.npz (index_name, in output order)."""
    import onnx
    d.mkdir(parents=True, exist_ok=True)
    onnx.save(case.model, str(d / "model.onnx"))
    g = case.model.graph
    init = {i.name for i in g.initializer}
    names = [i.name for i in g.input if i.name not in init]
    ins, outs = case.data_sets[0]
    np.savez(d / "inputs.npz", **dict(zip(names, ins)))
    np.savez(d / "expected.npz", **{f"{i}_{o.name}": x for i, (o, x) in enumerate(zip(g.output, outs))})
    opset = max((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), default=None)
    return {"opset": opset, "rtol": case.rtol, "atol": case.atol}


def probe(backend: str, d: Path, timeout: float) -> dict:
    """The backend alone on the original graph at fp32 (a subprocess: a crash costs this probe only)."""
    rc, out = run_killable([sys.executable, "-c", PROBE, backend, str(d)], timeout)
    if rc is None:
        return {"ran": False, "message": f"timeout after {timeout:.0f}s"}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if rc != 0 or not lines:
        return {"ran": False, "message": f"probe died (exit {rc}): {' '.join(out.split())[-300:]}"}
    return json.loads(lines[-1])


def cell_record(d: dict) -> dict:
    m = d.get("metrics") or {}
    return {k: d.get(k) for k in ("backend", "precision", "status", "stage", "component")} | {
        "reason": " ".join((d.get("reason") or "").split())[:400], "rel_l2": m.get("rel_l2"),
        "max_abs": m.get("max_abs")}


def judge_vs_expected(cells: list[dict], meta: dict) -> dict:
    """The witness's fp32 cell: fpdiff's float64 judge against the suite's expected outputs."""
    w = next((c for c in cells if c["backend"] == WITNESS and c["precision"] == "fp32"), None)
    if w is None or w["status"] in ("unsupported", "error", "crash", "timeout"):
        return {"compared": False, "why": (w or {}).get("reason", "no witness cell")}
    rl, ma = w.get("rel_l2"), w.get("max_abs")
    num = [x for x in (rl, ma) if isinstance(x, (int, float))]
    agrees = bool(num) and ((isinstance(rl, (int, float)) and rl <= meta["rtol"])
                            or (isinstance(ma, (int, float)) and ma <= meta["atol"]))
    return {"compared": True, "agrees": agrees, "rel_l2": rl, "max_abs": ma, "status": w["status"]}


def flag_cells(cells: list[dict], probes: dict) -> list[dict]:
    """Each counted fault of the backends' cells, with the evidence that decided it."""
    out = []
    ran_fp32 = {c["backend"]: c["status"] in ("pass", "precision-loss", "mismatch", "unjudged") for c in cells
                if c["precision"] == "fp32"}
    for c in cells:
        pr = probes.get(c["backend"]) if c["precision"] == "fp32" else None
        text = c["reason"]
        flags = []
        if pr and pr.get("ran"):
            if c["status"] == "unsupported":
                flags.append("false unsupported")
            elif c["status"] in ("error", "crash") and "internal error in fpdiff" not in (c.get("component") or ""):
                flags.append("misattributed")
            elif c["status"] == "mismatch" and isinstance(pr.get("rel_l2"), float) and pr["rel_l2"] <= 1e-5 \
                    and pr.get("exact_non_float", True):  # integer outputs must match exactly
                flags.append("false mismatch")
        if c["status"] in ("unsupported", "error") and any(m in text for m in INVALID_GRAPH) \
                and "misattributed" not in flags:
            flags.append("misattributed")
        if c["status"] == "error" and "internal error in fpdiff" in (c.get("component") or "") + text:
            flags.append("fpdiff internal error")
        if c["status"] == "unjudged":
            flags.append("unjudged")
        if c["status"] in ("unsupported", "error") and c["precision"] != "fp32" and ran_fp32.get(c["backend"]):
            flags.append("low-precision failure (unverified)")  # fp32 ran: is fp16's failure the backend's?
        if flags:
            out.append({"backend": c["backend"], "precision": c["precision"], "status": c["status"], "flags": flags,
                        "reason": text[:300], "probe": pr})
    for b in {c["backend"] for c in cells}:
        st = {c["status"]: c.get("stage") for c in cells
              if c["backend"] == b and c["status"] in ("unsupported", "error")}
        if "unsupported" in st and "error" in st and st["unsupported"] == st["error"]:
            out.append({"backend": b, "precision": "*", "status": "unsupported+error", "flags": ["misattributed"],
                        "reason": f"one failure at stage {st['error']}, two verdicts", "probe": None})
    return out


def run_case(case, work: Path, backends: list[str], precisions: list[str], timeout: float, cell_timeout: float,
             probe_timeout: float) -> dict:
    """One case: materialize, check through the CLI, probe the backends where a cell failed, flag."""
    t0 = time.perf_counter()
    d = work / case.name.replace("/", "__")
    meta = materialize(case, d)
    args = ["check", str(d / "model.onnx"), "--inputs", str(d / "inputs.npz"), "--backends",
            ",".join([*backends, WITNESS]), "--precisions", ",".join(precisions), "--plugin",
            str(HERE / "suite_expected_backend.py"), "--timeout", str(cell_timeout), "--repeat", "1", "--no-store"]
    r = fpdiff_cli(args, d / "check.json", timeout, env={"FPDIFF_SUITE_EXPECTED": str(d / "expected.npz")})
    rep = r.pop("report") or {}
    cells = [cell_record(c) for c in rep.get("cells", [])]
    witness = judge_vs_expected(cells, meta)
    cells = [c for c in cells if c["backend"] != WITNESS]
    probes = {c["backend"]: probe(c["backend"], d, probe_timeout) for c in cells
              if c["precision"] == "fp32" and c["status"] in FAILED}
    judged = any(c["status"] in ("pass", "precision-loss", "mismatch", "unjudged") for c in cells)
    return {"case": case.name, **meta, **r, "cells": cells, "judge": rep.get("judge"),
            "conversion": ((rep.get("source") or {}).get("conversion") or {}).get("status"),
            "judge_vs_expected": witness, "probes": probes, "flags": flag_cells(cells, probes),
            "judged_nothing": r["outcome"] == "answer" and not judged,
            "wall_s": round(time.perf_counter() - t0, 1)}


def summarize(results: list[dict]) -> dict:
    """Counts over cases and cells: outcomes, statuses, faults, judge against expected."""
    outcomes: dict[str, int] = {}
    statuses: dict[str, dict[str, int]] = {}
    faults: dict[str, int] = {}
    for r in results:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        for c in r["cells"]:
            col = statuses.setdefault(f"{c['backend']} {c['precision']}", {})
            col[c["status"]] = col.get(c["status"], 0) + 1
        for f in r["flags"]:
            for k in f["flags"]:
                faults[k] = faults.get(k, 0) + 1
    jve = [r["judge_vs_expected"] for r in results]
    return {"cases": len(results), "outcomes": outcomes, "tracebacks": sum(r["traceback"] for r in results),
            "cells": sum(len(r["cells"]) for r in results), "statuses": statuses, "faults": faults,
            "judged_nothing": [r["case"] for r in results if r["judged_nothing"]],
            "judge_unchecked": [r["case"] for r in results if (r.get("judge") or {}).get("status") == "unchecked"],
            "judge_suspect": [r["case"] for r in results if (r.get("judge") or {}).get("status") == "suspect"],
            "original_kept": [r["case"] for r in results if r.get("conversion") not in (None, "converted", "current")],
            "judge_vs_expected": {"compared": sum(j["compared"] for j in jve),
                                  "disagree": [r["case"] for r, j in zip(results, jve) if j.get("compared")
                                               and not j["agrees"]]},
            "case_s": {"total": round(sum(r["wall_s"] for r in results), 1),
                       "median": float(np.median([r["wall_s"] for r in results])) if results else 0.0,
                       "max": max((r["wall_s"] for r in results), default=0.0)}}


def markdown(results: list[dict], summary: dict, command: str) -> str:
    s, f = summary, summary["faults"]
    out = [f"Command: `{command}`", "",
           f"Cases: {s['cases']} ({', '.join(f'{k} {v}' for k, v in sorted(s['outcomes'].items()))}); tracebacks: "
           f"{s['tracebacks']}; cells: {s['cells']}; false mismatch: {f.get('false mismatch', 0)}; false "
           f"unsupported: {f.get('false unsupported', 0)}; misattributed: {f.get('misattributed', 0)}; unjudged "
           f"cells: {f.get('unjudged', 0)}; fpdiff internal errors: {f.get('fpdiff internal error', 0)}; cases that "
           f"judged nothing: {len(s['judged_nothing'])}; judge unchecked: {len(s['judge_unchecked'])}, suspect: "
           f"{len(s['judge_suspect'])}; judge against the suite's expected outputs: "
           f"{s['judge_vs_expected']['compared']} compared, {len(s['judge_vs_expected']['disagree'])} disagree; "
           f"original graph kept (conversion not used): {len(s['original_kept'])}. Case time: median "
           f"{s['case_s']['median']:.1f} s, max {s['case_s']['max']:.0f} s, total {s['case_s']['total']:.0f} s.", ""]
    stats = sorted({k for col in s["statuses"].values() for k in col})
    out += ["| cell | " + " | ".join(stats) + " |", "|---" * (len(stats) + 1) + "|"]
    out += [f"| {col} | " + " | ".join(str(n.get(k, 0)) for k in stats) + " |" for col, n in s["statuses"].items()]
    out.append("")
    bad = [r for r in results if r["outcome"] != "answer" or r["traceback"]]
    if bad:
        out += ["Cases that did not answer, or printed a traceback:", ""]
        out += [f"- {r['case']}: {r['outcome']} (exit {r['rc']}): {r['message']}" for r in bad] + [""]
    flagged = [(r["case"], x) for r in results for x in r["flags"]]
    if flagged:
        out += ["Cells counted as faults (probe: the backend alone on the original graph at fp32):", ""]
        out += [f"- {case} {x['backend']} {x['precision']} {x['status']} [{', '.join(x['flags'])}]: {x['reason'][:200]}"
                + (f" | probe: {'ran' if x['probe'].get('ran') else 'failed'} {x['probe'].get('message', '')[:120]}"
                   if x.get("probe") else "") for case, x in flagged] + [""]
    dis = [r for r in results if r["judge_vs_expected"].get("compared") and not r["judge_vs_expected"]["agrees"]]
    if dis:
        out += ["Judge against expected outputs, disagreeing:", ""]
        out += [f"- {r['case']}: rel L2 {r['judge_vs_expected']['rel_l2']}, max abs "
                f"{r['judge_vs_expected']['max_abs']} (rtol {r['rtol']}, atol {r['atol']})" for r in dis] + [""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("shipped", "node"), default="shipped",
                    help="shipped: the 140 cases the wheel ships with data (default); node: the generated node cases")
    ap.add_argument("--cases", help="regular expression on case names (applied before sampling)")
    ap.add_argument("--all", action="store_true", help="every case with plain tensor data, not the sample")
    ap.add_argument("--limit", type=int, help="at most this many cases, evenly spaced over the selection")
    ap.add_argument("--budget", type=float, help="start no case after this many seconds (the rest are listed)")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per case's check run (the CLI is killed)")
    ap.add_argument("--cell-timeout", type=float, default=120.0, help="fpdiff's --timeout per cell")
    ap.add_argument("--probe-timeout", type=float, default=180.0, help="seconds per direct backend run")
    ap.add_argument("--work", help="keep each case's files and report here (default: a temporary directory)")
    ap.add_argument("--md", help="write the markdown summary here too")
    ap.add_argument("--json", help="write every case here")
    ap.add_argument("--from-json", help="comma list of saved --json runs: recount them together, run nothing")
    a = ap.parse_args(argv)
    if a.from_json:
        runs = [json.loads(Path(p).read_text()) for p in a.from_json.split(",")]
        results = [r for run in runs for r in run["results"]]
        for r in results:  # the counting rules of this version, on the saved cells and probes
            r["flags"] = flag_cells(r["cells"], r["probes"])
        print(markdown(results, summarize(results), " + ".join(run["command"] for run in runs)))
        return 0
    if a.set == "shipped":
        cases = [c for c in shipped_cases() if not a.cases or re.search(a.cases, c.name)]
    else:
        cases = [c for c in all_cases() if not a.cases or re.search(a.cases, c.name)]
        cases = [c for c in cases if plain(c)] if a.all else sample(cases)
    cases = spaced(cases, a.limit) if a.limit else cases
    work = Path(a.work or tempfile.mkdtemp(prefix="onnx-suite-"))
    where = subprocess.run([sys.executable, "-c", "import fpdiff; print(fpdiff.__file__)"], capture_output=True,
                           text=True).stdout.strip()
    print(f"fpdiff under test: {where}; {len(cases)} cases", flush=True)
    t0 = time.perf_counter()
    results = []
    skipped = []
    for i, case in enumerate(cases):
        if a.budget and time.perf_counter() - t0 > a.budget:
            skipped = [c.name for c in cases[i:]]
            print(f"budget of {a.budget:.0f}s spent: {len(skipped)} cases not run", flush=True)
            break
        r = run_case(case, work, a.backends.split(","), a.precisions.split(","), a.timeout, a.cell_timeout,
                     a.probe_timeout)
        results.append(r)
        print(f"[{i + 1}/{len(cases)}] {case.name}: {r['outcome']}{' TRACEBACK' if r['traceback'] else ''} "
              f"{r['wall_s']}s " + " ".join(f"{c['backend']}/{c['precision']}={c['status']}" for c in r["cells"])
              + "".join(f" [{x['backend']} {x['precision']}: {', '.join(x['flags'])}]" for x in r["flags"]),
              flush=True)
    command = "python bench/onnx_suite.py " + " ".join(argv if argv is not None else sys.argv[1:])
    summary = summarize(results)
    md = markdown(results, summary, command.strip())
    print()
    print(md)
    if a.md:
        Path(a.md).write_text(md + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps({"command": command.strip(), "fpdiff": where,
                                            "cases": [c.name for c in cases], "not_run": skipped,
                                            "wall_s": round(time.perf_counter() - t0, 1), "summary": summary,
                                            "results": results}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
