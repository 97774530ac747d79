"""IREE llvm-cpu: ScatterElements into the values of a TopK that keeps the whole dim fails to compile with a dynamic dim ("unbounded stack allocations"). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import numpy as np, onnx
from onnx import TensorProto as TP, helper, numpy_helper

t = lambda name, ty: helper.make_tensor_value_info(name, ty, ["n", 2])  # the leading dim dynamic
nodes = [helper.make_node("TopK", ["x", "k"], ["v", "vi"], axis=1, largest=0),  # k = 2 of 2: a sort along dim 1
         helper.make_node("ScatterElements", ["v", "i", "u"], ["y"], axis=0, reduction="add")]
g = helper.make_graph(nodes, "g", [t("x", TP.FLOAT), t("i", TP.INT64), t("u", TP.FLOAT)], [t("y", TP.FLOAT)],
                      [numpy_helper.from_array(np.array([2], dtype=np.int64), "k")])
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
m = os.path.join(tempfile.mkdtemp(), "m.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), m)
subprocess.run(["iree-import-onnx", m, "-o", m + ".mlir"], check=True)
r = subprocess.run(["iree-compile", m + ".mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host", "-o", m + ".vmfb"], capture_output=True, text=True)
print("iree-compile exit", r.returncode, next((ln.split(" ", 1)[1] for ln in r.stderr.splitlines() if "error:" in ln), ""))
sys.exit(int(r.returncode != 0 and "expected no unbounded stack allocations" in r.stderr))
