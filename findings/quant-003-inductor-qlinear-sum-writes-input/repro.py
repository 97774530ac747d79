# Inductor (freezing) fuses a PT2E-int8 `x + linear(x)` into qlinear_pointwise.binary 'sum', accumulating into input x.
import sys
import torch
import torch._inductor.config as ic
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)
class M(torch.nn.Module):
    def __init__(self): super().__init__(); self.lin = torch.nn.Linear(16, 16)
    def forward(self, x): return x + self.lin(x)
torch.manual_seed(0)
model, x = M().eval(), torch.randn(4, 16)
q = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
prepared = prepare_pt2e(torch.export.export(model, (x,)).module(), q); prepared(x)
converted = convert_pt2e(prepared)
with torch.no_grad(), ic.patch(freezing=True):
    x0, expected = x.clone(), converted(x.clone())
    compiled = torch.compile(converted)
    out1 = compiled(x).clone(); changed = (x - x0).abs().max().item()
    out2 = compiled(x).clone()
print(f"input changed by {changed:.3g}; first call vs eager {(out1 - expected).abs().max().item():.3g}; "
      f"second call vs first {(out2 - out1).abs().max().item():.3g}")
sys.exit(int(changed > 0 or not torch.equal(out1, out2)))
