"""IREE llvm-cpu: fp32 sin reduces by one float pi/2, so tiny negative x loses itself and large x drifts (|sin| > 1 past 1e8). Exit 1: reproduced."""
import math, os, subprocess, sys, tempfile
import numpy as np, onnx, iree.runtime as rt
from onnx import TensorProto as TP, helper

run = lambda mod, *a: subprocess.run([sys.executable, "-m", "iree.compiler.tools." + mod, *a], check=True)  # iree-import-onnx, iree-compile
d = tempfile.mkdtemp()
g = helper.make_graph([helper.make_node("Sin", ["x"], ["y"])], "main",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [6])], [helper.make_tensor_value_info("y", TP.FLOAT, [6])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), f"{d}/sin.onnx")
run("import_onnx", f"{d}/sin.onnx", "-o", f"{d}/sin.mlir")
run("scripts.iree_compile", f"{d}/sin.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host", "-o", f"{d}/sin.vmfb")
x = np.array([-7.23e-8, -1e-6, -1e-30, 1e-6, 1e4, 1e9], dtype=np.float32)
got = np.asarray(rt.load_vm_flatbuffer_file(f"{d}/sin.vmfb", driver="local-task").main(x).to_host())
want = np.array([math.sin(v) for v in x.astype(np.float64)])  # float64 sin of the same fp32 inputs
print("x:               ", x, "\niree:            ", got, "\nfloat64 expected:", want)
print("relative error:  ", np.abs(got - want) / np.abs(want))
sys.exit(int(not np.allclose(got, want, rtol=1e-5, atol=0)))
