"""OpenVINO: GatherElements / torch.gather with indices narrower than the data outside the axis.
Exit 1 while the bug is there (any of the routes fails), 0 when all three return torch's answer."""
import sys
import numpy as np
import onnx
import openvino as ov
import torch
from onnx import TensorProto, helper

data = np.arange(8, dtype=np.float32).reshape(2, 4, 1)
idx = np.array([[[3]]], dtype=np.int64)          # [1, 1, 1]: dim 0 is 1 where the data has 2
want = torch.gather(torch.from_numpy(data), 1, torch.from_numpy(idx)).numpy()   # [[[3.]]]
failed = False


def onnx_model(dshape):
    g = helper.make_graph([helper.make_node("GatherElements", ["data", "idx"], ["out"], axis=1)], "g",
                          [helper.make_tensor_value_info("data", TensorProto.FLOAT, dshape),
                           helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 1, 1])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, 1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def attempt(name, make):
    global failed
    try:
        got = make()
        print(f"{name}: {got.ravel()} (torch.gather: {want.ravel()})")
        failed |= not np.array_equal(got, want)
    except Exception as e:
        failed = True
        print(f"{name}: FAILS: " + next((ln.strip() for ln in str(e).splitlines() if "Shapes" in ln), str(e)[-200:]))


for label, dshape in [("static [2, 4, 1]", [2, 4, 1]), ("dynamic [?, ?, 1]", ["a", "b", 1])]:
    m = onnx_model(dshape)
    onnx.checker.check_model(m)
    onnx.save(m, "gather_elements.onnx")
    attempt(f"ONNX GatherElements, data {label}",
            lambda: ov.Core().compile_model(ov.Core().read_model("gather_elements.onnx"), "CPU")([data, idx])[0])


class Gather(torch.nn.Module):
    def forward(self, x, i):
        return torch.gather(x, 1, i)


attempt("PyTorch frontend, torch.gather",
        lambda: ov.compile_model(ov.convert_model(Gather(), example_input=(torch.from_numpy(data), torch.from_numpy(idx))),
                                 "CPU")([data, idx])[0])
sys.exit(1 if failed else 0)
