"""torch.onnx (dynamo exporter, torch 2.13): scaled_dot_product_attention with a per-head position bias as its
mask, then transpose + reshape, fails to export: "Cannot view a tensor with shape [2, 16, 4, 32] and strides
(2048, 32, 512, 1) as a tensor with shape (2, 16, 128)".

Our reading: torch.export records the reshape as a view, valid for the strides the fused CPU attention kernel
gives its output; the exporter's decomposition of the attention gives (batch, heads, seq, dim) contiguous strides,
so after the transpose the recorded view is no longer possible. Without the mask the export works. Small
transformers T5 and Swin models fail this way (and GPT-2 under ExportedProgram.run_decompositions() with the
default table). Eager torch and torch.export itself are fine; the TorchScript exporter (dynamo=False) exports the
same module.

Run: python torch_onnx_sdpa_view.py   (needs torch, onnxscript). Prints what fails; exits 1 while it does.
"""
import contextlib
import io
import logging
import sys

import torch
import torch.nn.functional as F


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(128, 128, bias=False) for _ in range(3))
        self.position_bias = torch.nn.Embedding(32, 4)  # one learned bias per (distance, head), as in T5

    def forward(self, x):
        q, k, v = (proj(x).view(2, 16, 4, 32).transpose(1, 2) for proj in self.qkv)  # (batch, heads, seq, dim)
        distance = (torch.arange(16)[:, None] - torch.arange(16)[None, :]).abs()
        mask = self.position_bias(distance).permute(2, 0, 1).unsqueeze(0)  # (1, heads, seq, seq)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return a.transpose(1, 2).reshape(2, 16, 128)


def main() -> int:
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    model, x = Attention().eval(), torch.randn(2, 16, 128)
    program = torch.export.export(model, (x,))
    print("torch", torch.__version__, "- eager and torch.export: OK")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            torch.onnx.export(program, (), dynamo=True, optimize=False)
    except Exception as e:
        cause = e
        while cause.__cause__ is not None:
            cause = cause.__cause__
        print("torch.onnx.export(dynamo=True) FAILS:", type(cause).__name__, str(cause).splitlines()[0])
        torch.onnx.export(model, (x,), io.BytesIO(), dynamo=False)
        print("torch.onnx.export(dynamo=False) of the same module: OK")
        return 1
    print("torch.onnx.export(dynamo=True): OK (fixed in this version)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
