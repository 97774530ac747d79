"""IREE llvm-cpu: scatter_add into topk's values (k = the whole dim) with a dynamic dim fails to compile.
Exit 1 while the bug is there."""
import sys
import torch
import iree.compiler as ireec
from iree.compiler.extras.fx_importer import FxImporter
from torch.export import Dim


class M(torch.nn.Module):
    def forward(self, x, i, u):
        return torch.topk(x, 2, dim=1, largest=False).values.scatter_add(0, i, u)


def compile_(dynamic_shapes):
    x, i, u = torch.randn(17, 2), torch.randint(0, 17, (17, 2)), torch.randn(17, 2)
    imp = FxImporter()
    imp.import_frozen_program(torch.export.export(M(), (x, i, u), dynamic_shapes=dynamic_shapes), func_name="main")
    ireec.compile_str(str(imp.module), target_backends=["llvm-cpu"], input_type="torch",
                      extra_args=["--iree-llvmcpu-target-cpu=host"])


compile_(None)
print("static [17, 2]: compiles")
n = Dim("n", min=2, max=64)
try:
    compile_(({0: n}, {0: n}, {0: n}))
    print("dynamic [n, 2]: compiles")
    sys.exit(0)
except Exception as e:
    print("dynamic [n, 2]: " + next(ln.strip() for ln in str(e).splitlines() if "error:" in ln))
    # error: 'memref.alloca' op expected no unbounded stack allocations
    sys.exit(1)
