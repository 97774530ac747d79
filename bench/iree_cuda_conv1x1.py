"""Standalone repro: IREE 3.13 CUDA (target sm_80, run on an H200) computes a 1x1 fp16 Conv2d wrongly.

`compile DIR` (any machine; needs iree-base-compiler and torch) writes, per case and dtype, a CUDA and an
llvm-cpu module from the same MLIR, the input and the float64 expected output; `run DIR` (the GPU machine; needs
only iree-base-runtime and numpy) prints relative L2 against float64 for both.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np

mode, out = sys.argv[1], Path(sys.argv[2])
CASES = {"1x1-bias": (1, True), "1x1-nobias": (1, False), "3x3-bias": (3, True)}
if mode == "compile":
    import torch
    from iree.compiler.extras.fx_importer import FxImporter

    from fpdiff.backends.iree import compile_flags, tool
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(2, 32, 16, 16)
    for case, (k, bias) in CASES.items():
        conv = torch.nn.Conv2d(32, 32, k, padding=k // 2, bias=bias).eval()
        ref = conv.double()(x.double()).detach().numpy()
        for dt, name in ((torch.float16, "fp16"), (torch.float32, "fp32")):
            c = torch.nn.Conv2d(32, 32, k, padding=k // 2, bias=bias)
            c.load_state_dict(conv.state_dict())
            c = c.to(dt).eval()
            imp = FxImporter()
            imp.import_frozen_program(torch.export.export(c, (x.to(dt),)), func_name="main")
            mlir = out / f"{case}-{name}.mlir"
            mlir.write_text(str(imp.module))
            for dev, sfx in (("cuda", ".vmfb"), ("cpu", ".cpu.vmfb")):
                subprocess.run([tool("iree-compile"), str(mlir), "--iree-input-type=torch",
                                *compile_flags(dev, name, ()), "-o", str(out / f"{case}-{name}{sfx}")], check=True)
            np.savez(out / f"{case}-{name}.npz", ref=ref, x=x.to(dt).numpy())
else:
    import iree.runtime as rt
    for case in CASES:
        for name in ("fp32", "fp16"):
            d = np.load(out / f"{case}-{name}.npz")
            res = []
            for sfx, drv in ((".vmfb", "cuda"), (".cpu.vmfb", "local-task")):
                module = rt.load_vm_flatbuffer_file(str(out / f"{case}-{name}{sfx}"), driver=drv)
                y = np.asarray(module.main(d["x"]).to_host(), dtype=np.float64)
                res.append(np.linalg.norm(y - d["ref"]) / np.linalg.norm(d["ref"]))
            print(f"conv {case:11s} {name}: rel L2 vs float64: iree cuda {res[0]:.2e}  iree llvm-cpu {res[1]:.2e}")
