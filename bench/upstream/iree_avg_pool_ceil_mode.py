"""iree-compile 3.13 (llvm-cpu) rejects avg_pool2d whose kernel is larger than its input with ceil_mode=True:
"'linalg.generic' op inferred input/output operand #1 has shape's dimension #0 to be 6, but found 4".

torch gives a 1x1 output (the window is clipped to the input). transformers' EfficientNetModel pools exactly so
(nn.AvgPool2d(config.hidden_dim, ceil_mode=True) over a 2x2 map), so its IREE cells fail at compile.
Imported through IREE's own FX importer, no fpdiff involved.

Run: python iree_avg_pool_ceil_mode.py   (needs torch, iree-base-compiler). Prints what fails; exits 1 while it does.
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import torch


class Pool(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pool = torch.nn.AvgPool2d(4, ceil_mode=True)  # kernel 4 over a 2x2 input

    def forward(self, x):
        return self.pool(x)


def main() -> int:
    from iree.compiler.extras.fx_importer import FxImporter
    x = torch.randn(1, 3, 2, 2)
    print("torch:", tuple(Pool()(x).shape), "- eager OK")
    imp = FxImporter()
    imp.import_frozen_program(torch.export.export(Pool(), (x,)), func_name="main")
    with tempfile.TemporaryDirectory() as tmp:
        mlir = Path(tmp) / "pool.mlir"
        mlir.write_text(str(imp.module))
        compiler = Path(sys.executable).with_name("iree-compile")
        r = subprocess.run([str(compiler) if compiler.exists() else "iree-compile", str(mlir),
                            "--iree-input-type=torch", "--iree-hal-target-device=local",
                            "--iree-hal-local-target-device-backends=llvm-cpu", "-o", str(Path(tmp) / "pool.vmfb")],
                           capture_output=True, text=True)
    if r.returncode:
        print("iree-compile FAILS:", next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr[-300:]))
        return 1
    print("iree-compile: OK (fixed in this version)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
