"""IREE: ONNX GridSample on float16 data fails to compile ('arith.divf' with mixed f32/f16 operands). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import onnx
from onnx import TensorProto as TP, helper
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

def compile_gridsample(dtype):  # X[1, 1, 4, 4], Grid[1, 6, 6, 2] -> Y[1, 1, 6, 6], bilinear, zeros padding
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="zeros", align_corners=0)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", dtype, [1, 1, 4, 4]), helper.make_tensor_value_info(
        "grid", dtype, [1, 6, 6, 2])], [helper.make_tensor_value_info("y", dtype, [1, 1, 6, 6])])
    d = tempfile.mkdtemp()
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)]), f"{d}/m.onnx")
    subprocess.run(["iree-import-onnx", f"{d}/m.onnx", "-o", f"{d}/m.mlir"], check=True)
    return subprocess.run(["iree-compile", f"{d}/m.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                           "--iree-llvmcpu-target-cpu=host", "-o", os.devnull], capture_output=True, text=True)

for name, dtype in [("float32", TP.FLOAT), ("float16", TP.FLOAT16)]:
    r = compile_gridsample(dtype)
    print(name, "compiles" if r.returncode == 0 else "fails: " + next((l for l in r.stderr.splitlines() if "error:" in l), r.stderr[-300:]))
sys.exit(int(r.returncode != 0 and "'arith.divf' op requires the same type for all operands and results" in r.stderr))
