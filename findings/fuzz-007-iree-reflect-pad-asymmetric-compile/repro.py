"""IREE llvm-cpu: ONNX Pad reflect, pads (1, 2) on the last dim of x[5, 3], fails to compile (workgroup tiling of a flip). Exit 1: reproduced."""
import subprocess, sys, tempfile
import numpy as np, onnx
from onnx import TensorProto as TP, helper, numpy_helper

run = lambda mod, *a: subprocess.run([sys.executable, "-m", "iree.compiler.tools." + mod, *a], capture_output=True, text=True)  # iree-import-onnx, iree-compile
d = tempfile.mkdtemp()
pads = numpy_helper.from_array(np.array([0, 1, 0, 2], dtype=np.int64), "pads")  # dim 1: 1 before, 2 after: [5, 3] -> [5, 6]
g = helper.make_graph([helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")], "main",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [5, 3])], [helper.make_tensor_value_info("y", TP.FLOAT, [5, 6])], [pads])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), f"{d}/pad.onnx")
imp = run("import_onnx", f"{d}/pad.onnx", "-o", f"{d}/pad.mlir")
assert imp.returncode == 0, imp.stderr
c = run("scripts.iree_compile", f"{d}/pad.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=host", "-o", f"{d}/pad.vmfb")
print("iree-compile rc", c.returncode, *[l for l in c.stderr.splitlines() if "error:" in l][:1])
sys.exit(1 if c.returncode and "to be greater than or equal to 2, but found 1" in c.stderr else 2 if c.returncode else 0)
