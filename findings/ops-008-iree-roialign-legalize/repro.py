"""IREE: ONNX RoiAlign fails to compile: torch.torchvision.roi_align is left unlowered ('torch.constant.int'). Exit 1: reproduced."""
import os, subprocess, sys, tempfile
import onnx
from onnx import TensorProto as TP, helper
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]  # iree-import-onnx, iree-compile
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

node = helper.make_node("RoiAlign", ["x", "rois", "batch_indices"], ["y"], output_height=5, output_width=5, sampling_ratio=2,
                        spatial_scale=1.0, coordinate_transformation_mode="output_half_pixel")
g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, 10, 10]), helper.make_tensor_value_info("rois", TP.FLOAT, [3, 4]),
                                    helper.make_tensor_value_info("batch_indices", TP.INT64, [3])], [helper.make_tensor_value_info("y", TP.FLOAT, [3, 1, 5, 5])])
d = tempfile.mkdtemp()
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)]), f"{d}/m.onnx")
subprocess.run(["iree-import-onnx", f"{d}/m.onnx", "-o", f"{d}/m.mlir"], check=True)
r = subprocess.run(["iree-compile", f"{d}/m.mlir", "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                    "--iree-llvmcpu-target-cpu=host", "-o", os.devnull, "--mlir-print-ir-after-failure"], capture_output=True, text=True)
said = r.stderr.splitlines()
print("compiles" if r.returncode == 0 else next((l for l in said if "error:" in l), r.stderr[-300:]))
print("left unlowered:", next((l.strip()[:120] for l in said if "torchvision.roi_align" in l), "(no torchvision.roi_align in the IR)"))
sys.exit(int(r.returncode != 0 and "failed to legalize operation 'torch.constant.int'" in r.stderr))
