"""IREE: torch avg_pool3d(x[2, 3, 3, 4, 4], kernel 2) fails to compile (unit output depth, input depth 3 > kernel 2). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import torch, iree.turbine.aot as aot
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-compile
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

class Pool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.avg_pool3d(x, kernel_size=(2, 2, 2))  # stride = kernel, no padding

for shape in [(2, 3, 4, 4, 4), (2, 3, 3, 4, 4)]:  # output depth 2, then 1 (the input's depth 3 is longer than the kernel)
    d = tempfile.mkdtemp()
    aot.export(Pool(), torch.randn(shape)).save_mlir(f"{d}/m.mlir")
    r = subprocess.run(["iree-compile", f"{d}/m.mlir", "--iree-input-type=torch", "--iree-hal-target-device=local",
                        "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host", "-o", os.devnull],
                       capture_output=True, text=True)
    print(list(shape), "compiles" if r.returncode == 0 else "fails: " + next((l for l in r.stderr.splitlines() if "error:" in l), r.stderr[-300:]))
sys.exit(int(r.returncode != 0 and "op inferred input/output operand #1 has shape's dimension #0 to be 3, but found 2" in r.stderr))
