"""litert-torch's converter on PT2E int8 programs (its own PT2EQuantizer), each a Linear then ops the program leaves
float: rotary's rotate_half (neg, cat) and a class token concatenated before the Linear's rows (cat, add). The .tflite
computes the neg and the cat in int8 with the Linear output's scale and zero point, so values past that range
saturate."""
import sys
import numpy as np, torch
import litert_torch
from litert_torch.quantize import pt2e_quantizer as pq
from litert_torch.quantize.quant_config import QuantConfig
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
from ai_edge_litert.interpreter import Interpreter


class RotateHalf(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(16, 16)
        with torch.no_grad():
            self.lin.bias.fill_(-1.0)  # outputs mostly below zero: an asymmetric range, its zero point well above -128
    def forward(self, x):
        y = self.lin(x)
        return torch.cat((-y[..., 8:], y[..., :8]), dim=-1)


class ClassToken(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.lin = torch.nn.Linear(16, 16)
        self.cls = torch.nn.Parameter(torch.full((1, 1, 16), 5.0))  # past the Linear's range, as a trained token may be
    def forward(self, x):
        return torch.cat((self.cls, self.lin(x)), dim=1) + 0.5


def departure(model, shape):
    """Largest distance, in output steps, of the .tflite from the quantized program it was converted from."""
    torch.manual_seed(0)
    quantizer = pq.PT2EQuantizer().set_global(pq.get_symmetric_quantization_config(is_per_channel=True))
    program = prepare_pt2e(torch.export.export(model.eval(), (torch.randn(shape),)).module(), quantizer)
    for _ in range(8):
        program(torch.randn(shape))
    program = convert_pt2e(program, fold_quantize=False)
    litert_torch.convert(program, (torch.randn(shape),), quant_config=QuantConfig(pt2e_quantizer=quantizer)).export("m.tflite")
    xt = torch.randn(shape)  # drawn as the calibration inputs were
    want = program(xt).detach().numpy()
    it = Interpreter("m.tflite"); it.allocate_tensors()
    i, o = it.get_input_details()[0], it.get_output_details()[0]
    (si, zi), (so, zo) = i["quantization"], o["quantization"]
    it.set_tensor(i["index"], np.clip(np.rint(xt.numpy() / si) + zi, -128, 127).astype(np.int8)); it.invoke()
    got = it.get_tensor(o["index"]).astype(np.float64)
    got = (got - zo) * so if so else got
    step = so or it.get_tensor_details()[it._get_ops_details()[0]["outputs"][0]]["quantization"][0]
    print(type(model).__name__, [(d["op_name"], it.get_tensor_details()[d["outputs"][0]]["quantization"])
                                 for d in it._get_ops_details()][:5])
    return float(np.abs(got - want).max() / step)


print("litert-torch", litert_torch.__version__)
worst = {name: departure(m, s) for name, m, s in (("rotate_half", RotateHalf(), (4, 16)),
                                                   ("class token", ClassToken(), (1, 4, 16)))}
print({k: f"{v:.1f} steps" for k, v in worst.items()})
sys.exit(1 if max(worst.values()) > 1 else 0)
