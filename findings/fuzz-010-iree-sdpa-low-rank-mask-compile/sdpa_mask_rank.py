"""IREE (torch-mlir's TorchToTMTensor): scaled_dot_product_attention with an attn_mask of lower rank than the query
fails to compile. The route fpdiff takes: torch.export, IREE's FX importer, iree-compile (llvm-cpu).
Exit 1 when the minimal case (the first) fails to compile, 0 when it compiles."""
import sys
import torch
import torch.nn.functional as F
import iree.compiler as ireec
from iree.compiler.extras.fx_importer import FxImporter


class Masked(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class Unsqueezed(torch.nn.Module):  # the workaround: give the mask the query's rank
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask.reshape((1,) * (q.dim() - mask.dim()) + mask.shape))


def compile_sdpa(q_shape, kv_shape, mask_shape, mask_dtype=torch.bool, module=Masked()):
    q, k, v = torch.randn(q_shape), torch.randn(kv_shape), torch.randn(kv_shape)
    mask = torch.ones(mask_shape, dtype=torch.bool) if mask_dtype == torch.bool else torch.zeros(mask_shape)
    imp = FxImporter()
    imp.import_frozen_program(torch.export.export(module, (q, k, v, mask)), func_name="main")
    try:
        ireec.compile_str(str(imp.module), target_backends=["llvm-cpu"], input_type="torch",
                          extra_args=["--iree-llvmcpu-target-cpu=host"])
        return None
    except ireec.CompilerToolError as e:
        text = str(e)
        if "Error code: -" in text:
            return "iree-compile crashed (signal " + text.split("Error code: -")[1].split()[0] + ")"
        return next((ln.split("error: ", 1)[1] for ln in text.splitlines() if "error: " in ln), text[:200])


cases = [  # q, k/v, mask, mask dtype, module
    ((1, 1, 1), (1, 1, 1), (1, 1), torch.bool, Masked()),        # the fuzz case
    ((1, 2, 4, 8), (1, 2, 4, 8), (4, 4), torch.bool, Masked()),  # (L, S) mask, (N, H, L, E) query
    ((1, 2, 4, 8), (1, 2, 4, 8), (4, 4), torch.float32, Masked()),  # a float additive mask: the same
    ((1, 4, 8), (1, 4, 8), (4,), torch.bool, Masked()),          # rank-1 mask
    ((1, 2, 4, 8), (1, 2, 4, 8), (1, 1, 4, 4), torch.bool, Masked()),  # the same rank as q: compiles
    ((1, 2, 4, 8), (1, 2, 4, 8), (4, 4), torch.bool, Unsqueezed()),    # workaround: compiles
]
first = None
for i, (qs, ks, ms, dt, mod) in enumerate(cases):
    err = compile_sdpa(qs, ks, ms, dt, mod)
    print(f"q {list(qs)}, k/v {list(ks)}, mask {list(ms)} {str(dt).removeprefix('torch.')}"
          f"{' (unsqueezed to q rank)' if isinstance(mod, Unsqueezed) else ''}: {err or 'compiles'}", flush=True)
    if i == 0:
        first = err
sys.exit(1 if first else 0)
