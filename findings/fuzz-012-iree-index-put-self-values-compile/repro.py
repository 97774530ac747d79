"""IREE llvm-cpu: torch index_put whose values are its own destination (x[perm] = x, out of place) fails to compile. Exit 1: reproduced."""
import sys
import numpy as np, torch, iree.compiler as ireec, iree.runtime as rt
from iree.compiler.extras.fx_importer import FxImporter

class SelfValues(torch.nn.Module):
    def forward(self, i, x):
        return torch.index_put(x, [i], x)  # out of place: a permutation of x's rows

i, x = torch.tensor([2, 0, 1]), torch.tensor([[[1.0]], [[2.0]], [[3.0]]])
want = x.double().clone(); want[i] = x.double()  # float64: [2, 3, 1]
imp = FxImporter()
imp.import_frozen_program(torch.export.export(SelfValues(), (i, x)), func_name="main")
try:
    vmfb = ireec.compile_str(str(imp.module), target_backends=["llvm-cpu"], input_type="torch", extra_args=["--iree-llvmcpu-target-cpu=host"])
except ireec.CompilerToolError as e:
    print("iree-compile:", next(ln.strip() for ln in str(e).splitlines() if "error:" in ln), "\nexpected (float64):", want.ravel().numpy())
    sys.exit(int("write affecting operations on global resources are restricted to workgroup distributed contexts" in str(e)))
got = rt.load_vm_flatbuffer(vmfb, driver="local-task").main(i.numpy(), x.numpy()).to_host()
print("iree:", got.ravel(), "\nexpected (float64):", want.ravel().numpy())
sys.exit(int(not np.array_equal(got, want.numpy())))
