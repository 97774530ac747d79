"""IREE: ONNX Det of the 2x2 matrix [[0, 1], [2, 3]] returns NaN instead of -2 (a zero first pivot). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import numpy as np, onnx, iree.runtime as rt
from onnx import TensorProto as TP, helper

g = helper.make_graph([helper.make_node("Det", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [2, 2])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [])])
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
m = os.path.join(tempfile.mkdtemp(), "det.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)]), m)
subprocess.run(["iree-import-onnx", m, "-o", m + ".mlir"], check=True)
subprocess.run(["iree-compile", m + ".mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host", "-o", m + ".vmfb"], check=True)
x = np.array([[0, 1], [2, 3]], dtype=np.float32)
want = x[0, 0].astype(np.float64) * x[1, 1] - x[0, 1].astype(np.float64) * x[1, 0]  # ad - bc = -2
got = np.asarray(rt.load_vm_flatbuffer_file(m + ".vmfb", driver="local-task").g(x).to_host())
print("iree:", got, " expected (float64):", want)
sys.exit(int(not np.allclose(got, want)))
