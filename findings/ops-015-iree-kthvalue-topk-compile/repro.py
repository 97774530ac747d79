"""IREE: torch.kthvalue fails to compile ("'tm_tensor.topk' op region block must end with a linalg_ext.yield i1"). Exit 1: reproduced."""
import os, subprocess, sys, tempfile, warnings
import torch, iree.turbine.aot as aot
warnings.filterwarnings("ignore")
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-compile
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

class Kth(torch.nn.Module):
    def forward(self, x):
        return torch.kthvalue(x, 2)  # the 2nd smallest along the last dim, and its index

d = tempfile.mkdtemp()
aot.export(Kth(), torch.randn(3, 4)).save_mlir(f"{d}/m.mlir")
r = subprocess.run(["iree-compile", f"{d}/m.mlir", "--iree-input-type=torch", "--iree-hal-target-device=local",
                    "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host", "-o", os.devnull],
                   capture_output=True, text=True)
print("compiles" if r.returncode == 0 else "fails: " + next((l for l in r.stderr.splitlines() if "error:" in l), r.stderr[-300:]))
sys.exit(int(r.returncode != 0 and "'tm_tensor.topk' op region block must end with a linalg_ext.yield i1" in r.stderr))
