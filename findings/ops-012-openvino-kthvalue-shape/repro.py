"""OpenVINO: torch.kthvalue converted from torch.export returns values[0] and values[1], not (values, indices). Exit 1: reproduced."""
import os, sys, warnings
import numpy as np, openvino as ov, torch
warnings.filterwarnings("ignore")
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

class Kth(torch.nn.Module):
    def forward(self, x):
        return torch.kthvalue(x, 2)  # along the last dim: values and indices of shape [2, 3]

x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
want = torch.kthvalue(torch.from_numpy(x).double(), 2)  # float64
for route, model in [("TorchScript", ov.convert_model(Kth(), example_input=(torch.from_numpy(x),))),
                     ("torch.export", ov.convert_model(torch.export.export(Kth(), (torch.from_numpy(x),))))]:
    got = list(ov.compile_model(model, "CPU")(x).values())
    print(f"{route}: shapes {[g.shape for g in got]}, values {got[0].ravel()}, second output {got[1].ravel()}")
print(f"expected: shapes {[tuple(w.shape) for w in want]}, values {want.values.numpy().ravel()}, indices {want.indices.numpy().ravel()}")
ok = [g.shape for g in got] == [tuple(w.shape) for w in want] and np.allclose(got[0], want.values) and np.array_equal(got[1], want.indices)
sys.exit(int(not ok))
