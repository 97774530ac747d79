"""IREE: ONNX Resize mode=cubic (and linear) on float16 data fails to compile ('arith.mulf' of f32 and f16). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import numpy as np, onnx
from onnx import TensorProto as TP, helper, numpy_helper
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

def compile_resize(dtype, mode):  # X[1, 1, 4, 4] -> Y[1, 1, 3, 3], scales a constant [1, 1, 0.8, 0.8]
    scales = numpy_helper.from_array(np.array([1, 1, 0.8, 0.8], np.float32), "scales")
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)], "g",
                          [helper.make_tensor_value_info("x", dtype, [1, 1, 4, 4])], [helper.make_tensor_value_info("y", dtype, [1, 1, 3, 3])], [scales])
    d = tempfile.mkdtemp()
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]), f"{d}/m.onnx")
    subprocess.run(["iree-import-onnx", f"{d}/m.onnx", "-o", f"{d}/m.mlir"], check=True)
    return subprocess.run(["iree-compile", f"{d}/m.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                           "--iree-llvmcpu-target-cpu=host", "-o", os.devnull], capture_output=True, text=True)

for name, dtype, mode in [("float32", TP.FLOAT, "cubic"), ("float16", TP.FLOAT16, "nearest"), ("float16", TP.FLOAT16, "linear"), ("float16", TP.FLOAT16, "cubic")]:
    r = compile_resize(dtype, mode)
    print(name, mode, "compiles" if r.returncode == 0 else "fails: " + next((l for l in r.stderr.splitlines() if "error:" in l), r.stderr[-300:]))
sys.exit(int(r.returncode != 0 and "'arith.mulf' op requires the same type for all operands and results" in r.stderr))
