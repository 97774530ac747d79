"""IREE: ONNX Compress(x[3, 2], condition[3], axis=0) fails to compile: 'tensor.cast' of tensor<?x1xi1> to tensor<2xi1>. Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import numpy as np, onnx
from onnx import TensorProto as TP, helper

g = helper.make_graph([helper.make_node("Compress", ["x", "condition"], ["y"], axis=0)], "g",  # ONNX's test_compress_0
                      [helper.make_tensor_value_info("x", TP.FLOAT, [3, 2]), helper.make_tensor_value_info("condition", TP.BOOL, [3])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [2, 2])])
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
m = os.path.join(tempfile.mkdtemp(), "compress.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), m)
subprocess.run(["iree-import-onnx", m, "-o", m + ".mlir"], check=True)
r = subprocess.run(["iree-compile", m + ".mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host", "-o", m + ".vmfb"], capture_output=True, text=True)
print("iree-compile exit", r.returncode, next((ln.split(" ", 1)[1] for ln in r.stderr.splitlines() if "error:" in ln), ""))
sys.exit(int(r.returncode != 0 and "'tensor.cast' op operand type 'tensor<?x1xi1>'" in r.stderr and "are cast incompatible" in r.stderr))
