"""IREE: the uint8 result of ONNX QuantizeLinear comes back as an int8 array, so every code >= 128 reads 256 too small. Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import numpy as np, onnx, iree.runtime as rt
from onnx import TensorProto as TP, helper, numpy_helper

g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "scale", "zero_point"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [6])], [helper.make_tensor_value_info("y", TP.UINT8, [6])],
                      [numpy_helper.from_array(np.array(2, dtype=np.float32), "scale"), numpy_helper.from_array(np.array(128, dtype=np.uint8), "zero_point")])
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
m = os.path.join(tempfile.mkdtemp(), "q.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), m)
subprocess.run(["iree-import-onnx", m, "-o", m + ".mlir"], check=True)
subprocess.run(["iree-compile", m + ".mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host", "-o", m + ".vmfb"], check=True)
x = np.array([0, 2, 3, 1000, -254, -1000], dtype=np.float32)
want = np.clip(np.rint(x.astype(np.float64) / 2) + 128, 0, 255)  # the spec: saturate(round(x / scale) + zero_point), half to even
got = np.asarray(rt.load_vm_flatbuffer_file(m + ".vmfb", driver="local-task").g(x).to_host())
print("iree:", got, got.dtype, "\nexpected (float64):", want, "(uint8)")
sys.exit(int(got.dtype != np.uint8 or not np.array_equal(got.astype(np.float64), want)))
