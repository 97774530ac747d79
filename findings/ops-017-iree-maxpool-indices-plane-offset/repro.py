"""IREE: ONNX MaxPool's Indices output leaves out the (n, c) plane offset. Exit 1: reproduced."""
import subprocess, sys
import numpy as np, onnx, onnxruntime as ort, iree.runtime as rt
from onnx import TensorProto as TP, helper

node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2])
g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 2, 6, 6])],
                      [helper.make_tensor_value_info("y", TP.FLOAT, [1, 2, 2, 2]), helper.make_tensor_value_info("i", TP.INT64, [1, 2, 2, 2])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), "mp.onnx")
x = np.random.default_rng(0).standard_normal((1, 2, 6, 6)).astype(np.float32)
_, want = ort.InferenceSession("mp.onnx").run(None, {"x": x})  # the spec: flattened over N x C x H x W
subprocess.run(["iree-import-onnx", "mp.onnx", "-o", "mp.mlir"], check=True)
subprocess.run(["iree-compile", "mp.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host", "-o", "mp.vmfb"], check=True)
_, got = [np.asarray(t.to_host()) for t in rt.load_vm_flatbuffer_file("mp.vmfb", driver="local-task").g(x)]
print("onnxruntime:", want.ravel(), "\niree:       ", got.ravel())
sys.exit(int(not np.array_equal(want, got)))
