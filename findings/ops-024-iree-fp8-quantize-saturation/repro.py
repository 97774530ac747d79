"""IREE: float8 e4m3fn QuantizeLinear ignores saturate=1: x / scale past +-464 becomes NaN (or -480 after DequantizeLinear) instead of +-448. Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import ml_dtypes, numpy as np, onnx, iree.runtime as rt
from onnx import TensorProto as TP, helper, numpy_helper

x = np.array([100, 440, 464, 470, -470, 480, 600, -1000, 1e5], dtype=np.float32)
inits = [numpy_helper.from_array(np.array(1, np.float32), "s"), numpy_helper.from_array(np.array(0, ml_dtypes.float8_e4m3fn), "z")]
g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]), helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [x.size])], [helper.make_tensor_value_info("y", TP.FLOAT, [x.size])], inits)
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
m = os.path.join(tempfile.mkdtemp(), "qdq.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), m)
subprocess.run(["iree-import-onnx", m, "-o", m + ".mlir"], check=True)
subprocess.run(["iree-compile", m + ".mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host", "-o", m + ".vmfb"], check=True)
got = np.asarray(rt.load_vm_flatbuffer_file(m + ".vmfb", driver="local-task").g(x).to_host())
want = np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)  # the spec: saturate=1 (the default) clamps to +-448
for row in zip(x, got, want): print("x %8g   iree %6g   expected %6g" % row)
sys.exit(int(not np.array_equal(got, want, equal_nan=True)))
