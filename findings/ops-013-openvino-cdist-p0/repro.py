"""OpenVINO: torch.cdist(x1, x2, p=0) (the count of differing coordinates) converts to inf everywhere. Exit 1: reproduced."""
import os, sys, warnings
import numpy as np, openvino as ov, torch
warnings.filterwarnings("ignore")
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

class Hamming(torch.nn.Module):
    def forward(self, a, b):
        return torch.cdist(a, b, p=0.0)

a = np.array([[0, 1], [2, 2]], dtype=np.float32)
b = np.array([[0, 1], [2, 3], [5, 6]], dtype=np.float32)
want = (a.astype(np.float64)[:, None, :] != b.astype(np.float64)[None, :, :]).sum(-1).astype(np.float64)  # p=0: nonzero |a_i - b_j|
program = torch.export.export(Hamming(), (torch.from_numpy(a), torch.from_numpy(b)))
got = ov.compile_model(ov.convert_model(program), "CPU")([a, b])[0]
print("openvino:", got.ravel(), "\nexpected:", want.ravel(), "\ntorch:   ", Hamming()(torch.from_numpy(a), torch.from_numpy(b)).numpy().ravel())
sys.exit(int(not np.array_equal(got, want)))
