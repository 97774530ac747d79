"""IREE llvm-cpu: GatherElements from a strided Slice (step 3) fails in LLVM translation (unrealized_conversion_cast). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import numpy as np, onnx
from onnx import TensorProto as TP, helper, numpy_helper

c = lambda name, v: numpy_helper.from_array(np.array([v], dtype=np.int64), name)
nodes = [helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["xs"]),  # x[:, :, 26:45:3] -> [2, 1, 7]
         helper.make_node("GatherElements", ["xs", "i"], ["y"], axis=2)]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [2, 1, 45]), helper.make_tensor_value_info("i", TP.INT64, [2, 1, 1])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [2, 1, 1])], [c("s", 26), c("e", 45), c("a", 2), c("st", 3)])
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
m = os.path.join(tempfile.mkdtemp(), "m.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), m)
subprocess.run(["iree-import-onnx", m, "-o", m + ".mlir"], check=True)
r = subprocess.run(["iree-compile", m + ".mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host", "-o", m + ".vmfb"], capture_output=True, text=True)
print("iree-compile exit", r.returncode, next((ln.split(" ", 1)[1] for ln in r.stderr.splitlines() if "error:" in ln), ""))
sys.exit(int(r.returncode != 0 and "LLVM Translation failed for operation: builtin.unrealized_conversion_cast" in r.stderr))
