"""IREE (torch-mlir TorchToTMTensor): scaled_dot_product_attention with an (L, S) mask under a rank-4 query fails to compile. Exit 1: reproduced."""
import sys
import torch, torch.nn.functional as F
import iree.compiler as ireec
from iree.compiler.extras.fx_importer import FxImporter


class M(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


q = k = v = torch.randn(1, 2, 4, 8)
mask = torch.ones(4, 4, dtype=torch.bool)  # (L, S): broadcasts over batch and heads in torch
imp = FxImporter()
imp.import_frozen_program(torch.export.export(M(), (q, k, v, mask)), func_name="main")
try:
    ireec.compile_str(str(imp.module), target_backends=["llvm-cpu"], input_type="torch", extra_args=["--iree-llvmcpu-target-cpu=host"])
    sys.exit(print("compiles: not reproduced") or 0)
except ireec.CompilerToolError as e:
    print(*[ln.strip() for ln in str(e).splitlines() if "error:" in ln][:1])
    sys.exit(1 if "'tensor.collapse_shape' op expected the expanded type" in str(e) else 2)
