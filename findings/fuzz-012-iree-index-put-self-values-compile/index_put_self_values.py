"""IREE: index_put whose values are its own destination fails to compile. Exit 1 while the bug is there."""
import sys
import numpy as np
import torch
import iree.compiler as ireec
import iree.runtime as rt
from iree.compiler.extras.fx_importer import FxImporter


class SelfValues(torch.nn.Module):        # y[perm] = y, out of place: a row permutation
    def forward(self, i, x):
        return torch.index_put(x, [i], x)


class OtherValues(torch.nn.Module):       # the same op with values that are another tensor: compiles
    def forward(self, i, x, v):
        return torch.index_put(x, [i], v)


def compile_(module, args):
    imp = FxImporter()
    imp.import_frozen_program(torch.export.export(module, args), func_name="main")
    return ireec.compile_str(str(imp.module), target_backends=["llvm-cpu"], input_type="torch",
                             extra_args=["--iree-llvmcpu-target-cpu=host"])


i = torch.tensor([2, 0, 1])
x = torch.randn(3, 1, 1)
vmfb = compile_(OtherValues(), (i, x, x.clone()))
got = rt.load_vm_flatbuffer(vmfb, driver="local-task").main(i.numpy(), x.numpy(), x.numpy()).to_host()
print("values another tensor: compiles, equal to eager:", np.array_equal(got, OtherValues()(i, x, x).numpy()))
try:
    compile_(SelfValues(), (i, x))
    print("values = destination: compiles")
    sys.exit(0)
except Exception as e:
    print("values = destination: " + next(ln.strip() for ln in str(e).splitlines() if "error:" in ln))
    # error: 'linalg.generic' op write affecting operations on global resources are restricted to workgroup
    # distributed contexts.
    sys.exit(1)
