"""LiteRT on a full-integer conv2d quantized by litert-torch's PT2EQuantizer (per-channel symmetric weights): the
converter writes the file without a word, and the interpreter's default XNNPACK delegate fails to prepare it
("failed to create XNNPACK runtime", the conv node failed to prepare) when the conv's requantization scale (input
scale x weight scale / output scale) is large: here every output of the conv is zero (padding 1, stride 2 on a 1x1
input), its output scale is the quantizer's floor, and the weight is large. LiteRT's own kernels (no delegate)
run the same file."""
import sys, tempfile
import numpy as np
import torch
import torch.nn.functional as F
import litert_torch
from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
from litert_torch.quantize.quant_config import QuantConfig
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
from ai_edge_litert.interpreter import Interpreter, OpResolverType

W = float(sys.argv[1]) if len(sys.argv) > 1 else 18200.0
PAD, STRIDE, CAL = (int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])) if len(sys.argv) > 4 else (1, 2, 10.0)
class M(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.w = torch.nn.Parameter(torch.full((1, 1, 1, 1), W), requires_grad=False)
    def forward(s, x): return F.conv2d(x, s.w, padding=PAD, stride=STRIDE)
x = torch.tensor([0.0112, 0.0714]).reshape(2, 1, 1, 1)
quantizer = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
gm = prepare_pt2e(torch.export.export(M().eval(), (x,)).module(), quantizer)
gm(x * CAL); gm = convert_pt2e(gm, fold_quantize=False)
path = tempfile.mkdtemp() + "/m.tflite"
litert_torch.convert(gm, (x,), quant_config=QuantConfig(pt2e_quantizer=quantizer)).export(path)


def run(resolver):
    it = Interpreter(model_path=path, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    s, z = d["quantization"]
    it.set_tensor(d["index"], np.clip(np.rint(x.numpy() / s) + z, -128, 127).astype(d["dtype"]) if s else x.numpy())
    it.invoke()
    y = it.get_tensor(o["index"]).astype(np.float64)
    s, z = o["quantization"]
    return (y - z) * s if s else y


print("no delegate:", run(OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES).ravel().tolist())
try:
    print("XNNPACK:", run(OpResolverType.AUTO).ravel().tolist())
except (RuntimeError, ValueError) as e:
    print("BUG: XNNPACK delegate:", " ".join(str(e).split())[:300]); sys.exit(1)
sys.exit(0)
