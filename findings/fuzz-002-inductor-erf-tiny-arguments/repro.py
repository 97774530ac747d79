"""torch inductor (CPU): compiled fp32 erf has an absolute error of ~1.5e-7, so erf(8e-6) is 1.4% off and erf(1e-7) is 0. Exit 1: reproduced."""
import math, sys
import numpy as np, torch

x = torch.tensor([1e-7, 8.14e-6, 1e-4, 0.5], dtype=torch.float32)
got = torch.compile(torch.erf)(x).numpy()
eager = torch.erf(x).numpy()
want = np.array([math.erf(v) for v in x.double().tolist()])  # float64 erf of the same fp32 inputs
print("x:               ", x.numpy(), "\ninductor:        ", got, "\neager:           ", eager, "\nfloat64 expected:", want)
rel = np.abs(got - want) / np.abs(want)
print("inductor relative error:", rel)
sys.exit(int(not (rel.max() < 1e-5)))
