"""OpenVINO CPU: ONNX test_qlinearconv (scales as graph inputs) is off by one under the f16 hint. Exit 1: reproduced."""
import os, sys, tempfile, numpy as np, onnx, openvino as ov
from onnx import TensorProto as TP, helper

x = np.uint8([255, 174, 162, 25, 203, 168, 58, 15, 59, 237, 95, 129, 0, 64, 56, 242, 153, 221, 168, 12, 166, 232, 178, 186, 195,
              237, 162, 237, 188, 39, 124, 77, 80, 102, 43, 127, 230, 21, 83, 41, 40, 134, 255, 154, 92, 141, 42, 148, 247]).reshape(1, 1, 7, 7)
feeds = dict(x=x, xs=np.float32(0.00369204697), xz=np.uint8(132), w=np.zeros((1, 1, 1, 1), np.uint8),  # the ONNX test's inputs,
             ws=np.float32([0.00172794575]), wz=np.uint8([255]), ys=np.float32(0.00162681262), yz=np.uint8(123))  # all graph inputs
vi = [helper.make_tensor_value_info(k, TP.UINT8 if v.dtype == np.uint8 else TP.FLOAT, v.shape) for k, v in feeds.items()]
g = helper.make_graph([helper.make_node("QLinearConv", list(feeds), ["y"])], "g", vi, [helper.make_tensor_value_info("y", TP.UINT8, x.shape)])
path = os.path.join(tempfile.mkdtemp(), "qlinearconv.onnx")
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 10)]), path)
acc = (x - 132.0) * float(feeds["xs"]) * (0 - 255.0) * float(feeds["ws"][0])  # the spec in float64: conv of the dequantized x and w
want = np.clip(np.rint(acc / float(feeds["ys"])) + 123, 0, 255)  # requantized: equals the test case's expected output
for hint in ["f32", "bf16", "f16"]:
    got = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": hint})(feeds)[0]
    bad = np.argwhere(got != want)[:, 2:]
    print(f"hint {hint}: {len(bad)} of 49 differ", [f"[{i},{j}] {got[0, 0, i, j]} (spec {want[0, 0, i, j]:.0f})" for i, j in bad])
sys.exit(int(len(bad) > 0))
