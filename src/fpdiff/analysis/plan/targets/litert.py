"""LiteRT: a target that cannot express a plan (its converter keeps no chosen ops in fp32 beside fp16 ones), so it
writes nothing and says why."""
from __future__ import annotations

from pathlib import Path

from fpdiff.analysis.plan.exports import Context, ExportTarget
from fpdiff.analysis.plan.search import Export

LITERT_REASON = ("LiteRT's converter cannot keep chosen ops in fp32 while the rest computes in fp16: "
                 "its fp16 option (target_spec.supported_types=[tf.float16]) only stores the weights in fp16 and "
                 "computes in fp32, and real fp16 arithmetic is XNNPACK's force-fp16, which takes the whole model; "
                 "the plan ships mixed as --export executorch=PATH.pte (XNNPACK) or onnx-typed")


def _litert(ctx: Context, out: Path, e: Export) -> None:
    """LiteRT cannot compute chosen ops in fp32 beside fp16 ones: nothing is written, and the reason says why."""
    e.reason = LITERT_REASON


LITERT = ExportTarget("litert", ".tflite", _litert, "nothing: LiteRT cannot keep chosen ops in fp32")
