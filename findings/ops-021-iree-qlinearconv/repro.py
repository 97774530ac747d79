"""IREE: ONNX QLinearConv with per-channel weight scales adds the int32 bias unscaled (as if its scale were 1, not
x_scale * w_scale[c]). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import numpy as np, onnx, iree.runtime as rt
from onnx import TensorProto as TP, helper, numpy_helper as nh

sx, sw, sy, w, b = 0.25, np.array([0.5, 0.25], np.float32), 0.25, np.array([1, 2], np.int8), np.array([8, -16], np.int32)
c = {"sx": np.float32(sx), "z": np.int8(0), "w": w.reshape(2, 1, 1, 1), "sw": sw, "zw": np.zeros(2, np.int8), "sy": np.float32(sy), "b": b}
g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
                       helper.make_node("QLinearConv", ["xq", "sx", "z", "w", "sw", "zw", "sy", "z", "b"], ["yq"]),
                       helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 1, 1])], [helper.make_tensor_value_info("y", TP.FLOAT, [1, 2, 1, 1])],
                      [nh.from_array(np.asarray(v), k) for k, v in c.items()])
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
m = os.path.join(tempfile.mkdtemp(), "q.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), m)
subprocess.run(["iree-import-onnx", m, "-o", m + ".mlir"], check=True)
subprocess.run(["iree-compile", m + ".mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host", "-o", m + ".vmfb"], check=True)
x = np.ones((1, 1, 1, 1), np.float32)
xq = np.clip(np.rint(x.astype(np.float64) / sx), -128, 127)  # 4
acc = xq.ravel() * w + b  # the spec: integer conv + int32 bias, then requantize with x_scale * w_scale[c] / y_scale
want = np.clip(np.rint(acc * sx * sw.astype(np.float64) / sy), -128, 127) * sy
got = np.asarray(rt.load_vm_flatbuffer_file(m + ".vmfb", driver="local-task").g(x).to_host()).ravel()
print("iree:", got, "\nexpected (float64):", want)
sys.exit(int(not np.allclose(got, want)))
