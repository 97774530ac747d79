"""torch.onnx: cdist(p=0) exports (TorchScript exporter) to a graph that gives inf, not the count of differing coordinates. Exit 1: reproduced."""
import os, sys, tempfile, warnings
import numpy as np, onnxruntime as ort, torch
warnings.filterwarnings("ignore")
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

class Dist(torch.nn.Module):
    def __init__(self, p): super().__init__(); self.p = p
    def forward(self, a, b): return torch.cdist(a, b, p=self.p)

a, b = np.array([[0, 1], [2, 2]], dtype=np.float32), np.array([[0, 1], [2, 3], [5, 6]], dtype=np.float32)
d = np.abs(a.astype(np.float64)[:, None, :] - b.astype(np.float64)[None, :, :])  # float64 |a_i - b_j| per coordinate
for p, want in [(1.0, d.sum(-1)), (0.0, (d != 0).sum(-1).astype(np.float64))]:  # p=0: how many coordinates differ
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    torch.onnx.export(Dist(p), (torch.from_numpy(a), torch.from_numpy(b)), path, dynamo=False)
    got = ort.InferenceSession(path).run(None, dict(zip(["a", "b"], [a, b])))[0]
    print(f"p={p}: exported graph gives {got.ravel()}, expected {want.ravel()}")
try:
    torch.onnx.export(Dist(0.0), (torch.from_numpy(a), torch.from_numpy(b)), path, dynamo=True, verbose=False)
    print("dynamo exporter: exports")
except Exception as e:
    print("dynamo exporter:", next((l for l in str(e).splitlines() if "No ONNX function" in l), type(e).__name__).split(">: ", 1)[-1][:110])
sys.exit(int(not np.allclose(got, want)))
