"""IREE llvm-cpu: gather (tensor.extract) from a strided slice fails in LLVM translation. Exit 1 while the bug is there."""
import sys
import numpy as np
import torch
import iree.compiler as ireec
import iree.runtime as rt
from iree.compiler.extras.fx_importer import FxImporter


class StridedGather(torch.nn.Module):
    def __init__(self, step):
        super().__init__()
        self.step = step

    def forward(self, x, i):
        return torch.gather(x[:, 0::self.step], 1, i)      # every step-th column, then one element per row


def compile_(module, args):
    imp = FxImporter()
    imp.import_frozen_program(torch.export.export(module, args), func_name="main")
    return ireec.compile_str(str(imp.module), target_backends=["llvm-cpu"], input_type="torch",
                             extra_args=["--iree-llvmcpu-target-cpu=host"])


x = torch.randn(2, 12)
i = torch.tensor([[0], [3]])
bad = False
for step in (1, 3):
    m = StridedGather(step)
    try:
        vmfb = compile_(m, (x, i))
        got = rt.load_vm_flatbuffer(vmfb, driver="local-task").main(x.numpy(), i.numpy()).to_host()
        print(f"step {step}: compiles, equal to eager:", np.array_equal(got, m(x, i).numpy()))
    except Exception as e:
        bad = True
        print(f"step {step}: " + next(ln.strip() for ln in str(e).splitlines() if "error:" in ln))
        # error: LLVM Translation failed for operation: builtin.unrealized_conversion_cast
sys.exit(1 if bad else 0)
