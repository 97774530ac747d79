"""torch.onnx (dynamo): F.batch_norm(training=True) is exported as inference BatchNormalization (running stats, not the batch's). Exit 1: reproduced."""
import os, sys, tempfile, warnings
import numpy as np, onnx, onnxruntime as ort, torch
from onnx.reference import ReferenceEvaluator
warnings.filterwarnings("ignore")
sys.excepthook = lambda *e: (sys.__excepthook__(*e), os._exit(2))  # a crash of this script is not a reproduction

class BN(torch.nn.Module):
    def forward(self, x):  # normalize with the batch's statistics; the running ones are only updated
        return torch.nn.functional.batch_norm(x, torch.zeros(3), torch.ones(3), training=True)

x = np.arange(12, dtype=np.float32).reshape(4, 3)
x64 = x.astype(np.float64)
want = (x64 - x64.mean(0)) / np.sqrt(x64.var(0) + 1e-5)  # float64, the batch's mean and biased variance
path = os.path.join(tempfile.mkdtemp(), "m.onnx")
torch.onnx.export(BN(), (torch.from_numpy(x),), path, dynamo=True, verbose=False)
bn = next(n for n in onnx.load(path).graph.node if n.op_type == "BatchNormalization")
print("exported BatchNormalization attributes:", {a.name: onnx.helper.get_attribute_value(a) for a in bn.attribute})
got = ort.InferenceSession(path).run(None, {"x": x})[0]
ref = ReferenceEvaluator(path).run(None, {"x": x})[0]
print("onnxruntime:", got[:, 0], "\nonnx.reference:", ref[:, 0], "\nexpected (float64):", want[:, 0], "\ntorch eager:", BN()(torch.from_numpy(x)).numpy()[:, 0])
sys.exit(int(not np.allclose(got, want, atol=1e-4)))
