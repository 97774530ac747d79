"""IREE on CUDA for the examples, split in two so the GPU machine needs only the IREE runtime:
`compile DIR` (any machine: the CUDA target compiles without a GPU) writes a vmfb, inputs and the float64
reference per example and precision; `run DIR` (the GPU machine) runs them on the cuda driver and prints the
relative L2 error against float64, the same metric fpdiff check reports.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

EXAMPLES = ("tinycnn", "tinyformer", "rmsnorm")
PRECISIONS = ("fp32", "fp16")


def compile_all(out: Path) -> None:
    import subprocess

    from iree.compiler.extras.fx_importer import FxImporter

    from fpdiff.backends.iree import compile_flags, tool
    from fpdiff.core import precision as prec
    from fpdiff.model import graph
    from fpdiff.sources import load
    out.mkdir(parents=True, exist_ok=True)
    for ex in EXAMPLES:
        src = load(f"example:{ex}")
        ref = src.module.double()(*(t.double() if t.is_floating_point() else t for t in src.inputs))
        for name in PRECISIONS:
            p = prec.get(name)
            ep = graph.functional(graph.export(src.module.float(), src.inputs, p, graph.STATIC, None))
            imp = FxImporter()
            imp.import_frozen_program(ep, func_name="main")
            mlir = out / f"{ex}-{name}.mlir"
            mlir.write_text(str(imp.module))
            subprocess.run([tool("iree-compile"), str(mlir), "--iree-input-type=torch",
                            *compile_flags("cuda", p, ()), "-o", str(out / f"{ex}-{name}.vmfb")], check=True)
            mlir.unlink()
            np.savez(out / f"{ex}-{name}.npz", ref=ref.detach().numpy(),
                     **{f"in{i}": prec.cast_tensor(t, p).numpy() for i, t in enumerate(src.inputs)})
            print("compiled", ex, name)


def run_all(out: Path) -> None:
    import iree.runtime as rt
    for vmfb in sorted(out.glob("*.vmfb")):
        data = np.load(vmfb.with_suffix(".npz"))
        inputs = [data[k] for k in sorted(k for k in data.files if k.startswith("in"))]
        module = rt.load_vm_flatbuffer_file(str(vmfb), driver="cuda")
        y = np.asarray(module.main(*inputs).to_host(), dtype=np.float64)
        ref = data["ref"]
        rel = np.linalg.norm(y - ref) / np.linalg.norm(ref)
        print(f"iree cuda {vmfb.stem:22s} rel L2 vs float64 {rel:.2e}")


if __name__ == "__main__":
    {"compile": compile_all, "run": run_all}[sys.argv[1]](Path(sys.argv[2]))
