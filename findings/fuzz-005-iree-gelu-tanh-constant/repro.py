"""IREE (torch-mlir lowering): ONNX Gelu(approximate="tanh") uses sqrt(7/11) (pi as 22/7) for sqrt(2/pi). Exit 1: reproduced."""
import math, subprocess, sys, tempfile
import numpy as np, onnx, iree.runtime as rt
from onnx import TensorProto as TP, helper

run = lambda mod, *a: subprocess.run([sys.executable, "-m", "iree.compiler.tools." + mod, *a], check=True)  # iree-import-onnx, iree-compile
d = tempfile.mkdtemp()
g = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], "main",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [4])], [helper.make_tensor_value_info("y", TP.FLOAT, [4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), f"{d}/gelu.onnx")
run("import_onnx", f"{d}/gelu.onnx", "-o", f"{d}/gelu.mlir")
run("scripts.iree_compile", f"{d}/gelu.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host", "-o", f"{d}/gelu.vmfb")
x = np.array([0.5, 2.0, -2.0, -3.37], dtype=np.float32)
got = np.asarray(rt.load_vm_flatbuffer_file(f"{d}/gelu.vmfb", driver="local-task").main(x).to_host())
gelu = lambda v, c: 0.5 * v * (1 + math.tanh(c * (v + 0.044715 * v ** 3)))  # the ONNX spec's formula, float64
want = np.array([gelu(v, math.sqrt(2 / math.pi)) for v in x.astype(np.float64)])
print("iree:            ", got, "\nfloat64 expected:", want, "\nfloat64, sqrt(7/11) for sqrt(2/pi):", np.array([gelu(v, math.sqrt(7 / 11)) for v in x.astype(np.float64)]))
print("relative error:  ", np.abs(got - want) / np.abs(want))
sys.exit(int(not np.allclose(got, want, rtol=1e-5, atol=0)))
