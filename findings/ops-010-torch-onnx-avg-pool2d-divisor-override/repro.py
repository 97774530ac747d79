"""torch.onnx: avg_pool2d's divisor_override is dropped on export (both exporters): the graph divides by the window size. Exit 1: reproduced."""
import os, sys, tempfile, warnings
import numpy as np, onnxruntime as ort, torch
warnings.filterwarnings("ignore")
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

class SumPool(torch.nn.Module):
    def forward(self, x):  # divisor_override=1: each 2x2 window's sum
        return torch.nn.functional.avg_pool2d(x, 2, divisor_override=1)

x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
want = x.astype(np.float64).reshape(1, 1, 2, 2, 2, 2).sum(axis=(3, 5))  # float64: the window sums
bad = False
for dynamo in (True, False):
    path = os.path.join(tempfile.mkdtemp(), "m.onnx")
    torch.onnx.export(SumPool(), (torch.from_numpy(x),), path, dynamo=dynamo, verbose=False)
    sess = ort.InferenceSession(path)
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    print(f"dynamo={dynamo}: exported graph gives", got.ravel(), "expected", want.ravel(), " eager torch:", SumPool()(torch.from_numpy(x)).numpy().ravel())
    bad |= not np.allclose(got, want)
sys.exit(int(bad))
