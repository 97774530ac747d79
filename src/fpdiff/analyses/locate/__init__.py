"""locate declared: the first op whose own error at a precision is out of line, or the segment a backend gets
wrong."""
from __future__ import annotations

import argparse

from fpdiff.analyses import MODEL_RUN, Analysis
from fpdiff.analyses.args import precision_or_format
from fpdiff.analyses.locate import page, text
from fpdiff.analysis.locate import LOCAL_FACTOR, LocateOptions, LocateResult, locate
from fpdiff.core.errors import UsageError
from fpdiff.report import model_explorer


def _arguments(loc: argparse.ArgumentParser) -> None:
    loc.add_argument("--backend", default="torch",
                     help="torch: per-op analysis; any other backend or plugin: bisection over segments")
    loc.add_argument("--precision", type=precision_or_format, default="fp16",
                     help="a float precision, or a quantized format (int8, int8-dynamic, int4-weight, fp8): the "
                     "backend's quantized cell read layer by layer, where the format costs and where the backend "
                     "departs (default %(default)s)")
    loc.add_argument("--calibration", metavar="FILE.npz", help="a quantized format's calibration inputs, as "
                     "`fpdiff quant --calibration`")
    loc.add_argument("--repro", metavar="DIR", help="where the repro bundle goes "
                     "(default fpdiff-out/repro-BACKEND-PRECISION when there is something to reproduce)")
    loc.add_argument("--no-repro", action="store_true", help="write no repro bundle")
    loc.add_argument("--mark-all", action="store_true", help="one run with every tensor marked as an output, on a "
                     "backend that implements it (fast; may change what the backend fuses and so hide a fusion bug)")
    loc.add_argument("--shape-variant", help="segments keep this variant's dynamic dims (static, dynamic, mixed:...)")
    loc.add_argument("--artifact", metavar="PATH", help="your own converted file for --backend (.pte, .tflite, .onnx): "
                     "judged whole first, then localized by the model's ops (the file's runtime exposes no "
                     "intermediates), saying whether fpdiff's conversion departs as the file does")
    loc.add_argument("--top", type=int, default=10, help="rows in the table of worst ops")
    loc.add_argument("--model-explorer", metavar="PATH", help="write Model Explorer node data (local error here, "
                     "accumulated error beside it as *.accumulated.json)")


def _options(args: argparse.Namespace) -> LocateOptions:
    repro = None if args.no_repro else (args.repro or f"fpdiff-out/repro-{args.backend}-{args.precision}")
    return LocateOptions(backend=args.backend, precision=args.precision, device=args.device, repro=repro,
                         mark_all=args.mark_all, shape_variant=args.shape_variant, artifact=args.artifact,
                         calibration=args.calibration)


def _progress(args: argparse.Namespace, display):
    """locate names its step (ops, segments, ...) after the backend and precision."""
    def step(what: str, done: int, total: int | None) -> None:
        display(f"locate {args.backend} {args.precision}: {what}", done, total)
    return step


def _files(args: argparse.Namespace, console, result: LocateResult) -> None:
    if result.repro:
        console.print(f"repro bundle: python {result.repro}", highlight=False)
    if args.model_explorer:
        from fpdiff.core.precision import get
        p = get(result.precision)
        try:
            paths = model_explorer.write(result, args.model_explorer, LOCAL_FACTOR, p.unit_roundoff, p.tolerance)
        except OSError as e:
            raise UsageError(f"cannot write node data to {args.model_explorer}: {e.strerror or e}") from None
        console.print(f"Model Explorer node data: {', '.join(map(str, paths))}", highlight=False)



def locate_rows(report: dict) -> list[dict]:
    """What locate reports, one row each, `row` saying which: the ops of torch's analysis, the segment a backend
    gets wrong, the tensors of a mark-all run, the layers of a quantized cell."""
    ops = [{"row": "op", **o} for o in report.get("ops") or []]
    segment = [{"row": "segment", **report["segment"]}] if report.get("segment") else []
    tensors = [{"row": "tensor", **t} for t in (report.get("mark_all") or {}).get("rows") or []]
    layers = [{"row": "layer", **r} for r in (report.get("quantized") or {}).get("layers") or []]
    return ops + segment + tensors + layers


LOCATE = Analysis(
    name="locate", summary="the first op whose own error at a precision is out of line", run=locate,
    options=LocateOptions, model_help="spec .py, .onnx, exported program .pt2, hf:DIR or example:NAME",
    shared=MODEL_RUN,
    arguments=_arguments, from_args=_options, cli_groups=("device", "store"), progress_label="locate",
    progress_unit="", progress=_progress, view=lambda args: {"top": args.top}, files=_files,
    terminal=text.render, html=page.body, rows=locate_rows,
    names={"LocateResult": LocateResult, "LocateOptions": LocateOptions})
