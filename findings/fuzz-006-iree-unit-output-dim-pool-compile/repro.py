"""IREE: AveragePool whose output has a size-1 spatial dim while the input is longer than the kernel there fails to compile. Exit 1: reproduced."""
import subprocess, sys, tempfile
import onnx
from onnx import TensorProto as TP, helper

run = lambda mod, *a: subprocess.run([sys.executable, "-m", "iree.compiler.tools." + mod, *a], capture_output=True, text=True)  # iree-import-onnx, iree-compile
d = tempfile.mkdtemp()
node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2])  # H: (4 - 3) // 2 + 1 = 1
g = helper.make_graph([node], "main", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 4, 3])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [1, 1, 1, 1])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/pool.onnx")
imp = run("import_onnx", f"{d}/pool.onnx", "-o", f"{d}/pool.mlir")
assert imp.returncode == 0, imp.stderr
c = run("scripts.iree_compile", f"{d}/pool.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
        "--iree-llvmcpu-target-cpu=host", "-o", f"{d}/pool.vmfb")
print("iree-compile rc", c.returncode, *[l for l in c.stderr.splitlines() if "error:" in l][:1])
sys.exit(1 if c.returncode and "inferred input/output operand" in c.stderr else 2 if c.returncode else 0)
