"""litert-torch's converter on a PT2E int8 program (its own PT2EQuantizer): Linear -> cat(-y[8:], y[:8]), the neg and
cat left float in the program. The .tflite negates in int8 with the Linear output's asymmetric scale and zero point,
so a negated value past the type's range saturates."""
import sys
import numpy as np, torch
import litert_torch
from litert_torch.quantize import pt2e_quantizer as pq
from litert_torch.quantize.quant_config import QuantConfig
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from ai_edge_litert.interpreter import Interpreter

torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(16, 16)
    def forward(self, x):
        y = self.lin(x)
        return torch.cat((-y[..., 8:], y[..., :8]), dim=-1)  # rotate_half, as rotary embeddings compute it
model = M().eval()
with torch.no_grad():
    model.lin.bias.fill_(-1.0)  # outputs mostly below zero: an asymmetric range, its zero point well above -128
x = torch.randn(4, 16)
quantizer = pq.PT2EQuantizer().set_global(pq.get_symmetric_quantization_config(is_per_channel=True))
program = prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
for _ in range(8):
    program(torch.randn(4, 16))
program = convert_pt2e(program, fold_quantize=False)
litert_torch.convert(program, (x,), quant_config=QuantConfig(pt2e_quantizer=quantizer)).export("m.tflite")

xt = torch.randn(4, 16)  # drawn as the calibration inputs were
want = program(xt).detach().numpy()  # the quantized program itself
it = Interpreter("m.tflite"); it.allocate_tensors()
i, o = it.get_input_details()[0], it.get_output_details()[0]
(si, zi), (so, zo) = i["quantization"], o["quantization"]
it.set_tensor(i["index"], np.clip(np.rint(xt.numpy() / si) + zi, -128, 127).astype(np.int8)); it.invoke()
got = (it.get_tensor(o["index"]).astype(np.float64) - zo) * so
ops = [(d["op_name"], it.get_tensor_details()[d["outputs"][0]]["quantization"]) for d in it._get_ops_details()]
steps = np.abs(got - want) / so
print("litert-torch", litert_torch.__version__, "ops:", ops)
print(f"largest departure from the quantized program: {steps.max():.1f} output steps ({int((steps > 1).sum())} values)")
sys.exit(1 if steps.max() > 1 else 0)
