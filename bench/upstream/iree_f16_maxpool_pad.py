"""iree-compile 3.13 (llvm-cpu) fails on an fp16 ONNX MaxPool with padding: "failed to legalize operation
'util.initializer' that was explicitly marked illegal". The same node in fp32 compiles, and so does the fp16 node
without padding.

Found by `fpdiff locate` on the onnx wheel's light_bvlc_alexnet at fp16 on IREE (node n14: kernel 3, stride 2,
pads [0, 0, 1, 1]); light_inception_v2 at fp16 fails with the same message. No fpdiff involved here.

Run: python iree_f16_maxpool_pad.py   (needs onnx, iree-base-compiler). Exits 1 while it fails.
"""
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import onnx
from onnx import TensorProto, helper


def tool(name: str) -> str:
    return shutil.which(name) or str(Path(sysconfig.get_path("scripts")) / name)


def compiles(elem: int, pads: list[int]) -> tuple[bool, str]:
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=pads)
    out = 6 if sum(pads) else 5  # (12 + pads - 3) // 2 + 1
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", elem, [1, 8, 12, 12])],
                              [helper.make_tensor_value_info("y", elem, [1, 8, out, out])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(model, f"{tmp}/m.onnx")
        subprocess.run([tool("iree-import-onnx"), f"{tmp}/m.onnx", "-o", f"{tmp}/m.mlir"], check=True)
        r = subprocess.run([tool("iree-compile"), f"{tmp}/m.mlir", "--iree-hal-target-device=local",
                            "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host",
                            "-o", f"{tmp}/m.vmfb"], capture_output=True, text=True)
    errors = [ln for ln in r.stderr.splitlines() if "error" in ln]
    return r.returncode == 0, (errors or [""])[0][:200]


def main() -> int:
    results = {}
    for name, elem, pads in (("fp32, padded", TensorProto.FLOAT, [0, 0, 1, 1]),
                             ("fp16, unpadded", TensorProto.FLOAT16, [0, 0, 0, 0]),
                             ("fp16, padded", TensorProto.FLOAT16, [0, 0, 1, 1])):
        ok, why = compiles(elem, pads)
        results[name] = ok
        print(f"{name}: {'compiles' if ok else 'FAILS: ' + why}")
    return 0 if results["fp16, padded"] else 1


if __name__ == "__main__":
    sys.exit(main())
