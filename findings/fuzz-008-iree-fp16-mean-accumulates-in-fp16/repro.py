"""IREE llvm-cpu: an fp16 ReduceMean accumulates its sum in fp16, so the mean of [29400, 9410, 30000] is inf. Exit 1: reproduced."""
import subprocess, sys, tempfile
import numpy as np, onnx, iree.runtime as rt
from onnx import TensorProto as TP, helper, numpy_helper

run = lambda mod, *a: subprocess.run([sys.executable, "-m", "iree.compiler.tools." + mod, *a], check=True)  # iree-import-onnx, iree-compile
d = tempfile.mkdtemp()
axes = numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")
g = helper.make_graph([helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)], "main",
                      [helper.make_tensor_value_info("x", TP.FLOAT16, [2, 3])], [helper.make_tensor_value_info("y", TP.FLOAT16, [2, 1])], [axes])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), f"{d}/mean.onnx")
run("import_onnx", f"{d}/mean.onnx", "-o", f"{d}/mean.mlir")
run("scripts.iree_compile", f"{d}/mean.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host", "-o", f"{d}/mean.vmfb")
x = np.array([[29400, 9410, 30000], [-27400, -10600, 20000]], dtype=np.float16)  # row 0 sums to 68810 > 65504 (fp16 max)
got = np.asarray(rt.load_vm_flatbuffer_file(f"{d}/mean.vmfb", driver="local-task").main(x).to_host())
want = x.astype(np.float64).mean(axis=1, keepdims=True)  # float64; each mean fits fp16 easily
print("iree (fp16):     ", got.ravel(), "\nfloat64 expected:", want.ravel(), "\nfloat64 rounded to fp16:", want.astype(np.float16).ravel())
sys.exit(int(not np.allclose(got.astype(np.float64), want, rtol=1e-2)))
