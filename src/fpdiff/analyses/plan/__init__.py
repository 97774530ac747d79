"""plan declared: the ops to keep in fp32 so fp16/bf16 meets a tolerance, verified."""
from __future__ import annotations

import argparse

from fpdiff.analyses import MODEL_RUN, Analysis
from fpdiff.analyses.args import precision_or_format
from fpdiff.analyses.plan import page, text
from fpdiff.analysis.plan import Plan, PlanOptions, plan
from fpdiff.analysis.plan.torch_models import apply_plan
from fpdiff.core.errors import UsageError


def _arguments(pl: argparse.ArgumentParser) -> None:
    pl.add_argument("--precision", type=precision_or_format, default="fp16",
                    help="fp16 or bf16, or a quantized format (int8, int8-dynamic, int4-weight, fp8: the layers the "
                    "backend's quantizer leaves float) (default %(default)s)")
    pl.add_argument("--backend", default="torch", help="where the plan is verified (default %(default)s)")
    pl.add_argument("--tolerance", type=float, default=None,
                    help="relative L2 vs float64 to meet (default: the precision's check tolerance)")
    pl.add_argument("--save", metavar="PATH", help="write the verified plan (JSON) here")
    pl.add_argument("--load", metavar="PATH", help="re-verify a saved plan instead of searching")
    pl.add_argument("--export", action="append", default=[], metavar="TARGET=PATH",
                    help="write the verified plan for a target and verify the file (repeatable): onnx (fp32 in and "
                    "out), onnx-typed (the precision's dtype, every value typed: TensorRT's strongly typed mode), "
                    "coreml (.mlpackage), executorch (.pte, XNNPACK), litert (says why it cannot)")
    pl.add_argument("--export-onnx", metavar="PATH", help="the same as --export onnx=PATH")
    pl.add_argument("--no-speed", action="store_true", help="do not time the planned model")
    pl.add_argument("--backup", choices=("float", "int8"), default="float",
                    help="a quantized format's plan: what its layers become, float or int8 (8-bit weights in an "
                    "int4-weight model on ort) (default %(default)s)")


def _options(args: argparse.Namespace) -> PlanOptions:
    # the plan is saved after it is shown (_save), so a path it cannot write loses nothing
    return PlanOptions(precision=args.precision, backend=args.backend, tolerance=args.tolerance, device=args.device,
                       load=args.load, exports=args.export, export_onnx=args.export_onnx,
                       measure_speed=not args.no_speed, backup=args.backup)


def _save(args: argparse.Namespace, console, result: Plan) -> None:
    if args.save and result.passed:
        try:
            result.save(args.save)
        except OSError as e:
            raise UsageError(f"cannot write the plan to {args.save}: {e.strerror or e}") from None
        console.print(f"plan saved: {args.save}", highlight=False)



def plan_rows(report: dict) -> list[dict]:
    """One row per op the plan keeps in fp32, with the evidence for keeping it."""
    return [dict(k) for k in report.get("keep") or []]


PLAN = Analysis(
    name="plan", summary="the ops to keep in fp32 so fp16/bf16 meets a tolerance, verified", run=plan,
    options=PlanOptions,
    shared=MODEL_RUN,
    arguments=_arguments, from_args=_options, cli_groups=("device", "store"),
    progress_label="planning: evidence, then trials", progress_unit="evaluations", files=_save,
    terminal=text.render, html=page.body, rows=plan_rows,
    names={"Plan": Plan, "PlanOptions": PlanOptions, "apply_plan": apply_plan})
