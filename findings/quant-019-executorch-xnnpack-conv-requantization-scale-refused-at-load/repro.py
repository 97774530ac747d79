"""ExecuTorch's XNNPACK delegate on a PT2E int8 conv2d (XNNPACKQuantizer, per-channel symmetric weights): the
program lowers without a word, and the runtime refuses to load it (`Failed to load method forward`, Internal) when
the weight is large. XNNPACK's qs8 convolution refuses a requantization scale (input scale x weight scale / output
scale) of 256 or more at creation time; the partitioner delegates the conv without checking it."""
import sys, tempfile, torch
import torch.nn.functional as F
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime

W = float(sys.argv[1]) if len(sys.argv) > 1 else 18200.0
PAD, STRIDE, CAL = (int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])) if len(sys.argv) > 4 else (1, 2, 10.0)
class M(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.w = torch.nn.Parameter(torch.full((1, 1, 1, 1), W), requires_grad=False)
    def forward(s, x): return F.conv2d(x, s.w, padding=PAD, stride=STRIDE)
x = torch.tensor([0.0112, 0.0714]).reshape(2, 1, 1, 1)
gm = torch.export.export(M().eval(), (x,)).module()
gm = prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
gm(x * CAL); gm = convert_pt2e(gm)
for n in gm.graph.nodes:
    if "quantize_per" in str(n.target): print(n.target, [a for a in n.args[1:3]])
edge = to_edge_transform_and_lower(torch.export.export(gm, (x,)), partitioner=[XnnpackPartitioner()])
pte = tempfile.mkdtemp() + "/m.pte"
open(pte, "wb").write(edge.to_executorch().buffer)
try:
    out = Runtime.get().load_program(pte).load_method("forward").execute([x])
except RuntimeError as e:
    print("BUG:", e); sys.exit(1)
print("ok", out[0].flatten().tolist(), "eager", gm(x).flatten().tolist()); sys.exit(0)
