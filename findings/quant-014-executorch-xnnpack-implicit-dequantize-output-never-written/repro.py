"""ExecuTorch's XNNPACK delegate on a PT2E int8 Linear whose input's dequantize is also a graph output: the delegate
folds that dequantize into its quantized linear and never writes the output buffer (zeros, or what memory held).
`--portable` lowers without the delegate: every output is right there."""
import sys, tempfile, torch
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
import executorch.kernels.quantized  # noqa: F401  (out-variants of q/dq ops, for --portable)

torch.manual_seed(0)
USE_XNN = "--portable" not in sys.argv
class M(torch.nn.Module):
    def __init__(s): super().__init__(); s.lin = torch.nn.Linear(8, 4)
    def forward(s, x): return s.lin(x)
m = M().eval(); x = torch.randn(2, 8)
gm = torch.export.export(m, (x,)).module()
q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
gm = prepare_pt2e(gm, q)
for _ in range(4): gm(torch.randn(2, 8))
gm = convert_pt2e(gm)
# add activation dequantize_per_tensor outputs as extra graph outputs
dq = [n for n in gm.graph.nodes if n.target == torch.ops.quantized_decomposed.dequantize_per_tensor.default]
out = next(n for n in gm.graph.nodes if n.op == "output")
orig = out.args[0]; orig = list(orig) if isinstance(orig, (list, tuple)) else [orig]
out.args = (tuple(orig + dq),)
gm.graph._codegen = torch.fx.graph.CodeGen(); gm.recompile()
names = ["final"] + [f"{n.name}(<-{n.args[0].args[0].name}) users={[u.name for u in n.users if u.op!='output']}" for n in dq]
eager = gm(x)
ep = torch.export.export(gm, (x,))
edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()] if USE_XNN else [])
pte = tempfile.mkdtemp() + "/m.pte"
with open(pte, "wb") as f: f.write(edge.to_executorch().buffer)
et = Runtime.get().load_program(pte).load_method("forward").execute([x])
bug = False
for nm, e, r in zip(names, eager, et):
    zero = bool((r == 0).all()) and not bool((e == 0).all())
    bug |= zero
    print(f"{nm}: eager={e.flatten()[:4].tolist()} et={r.flatten()[:4].tolist()} max|diff|={(e-r).abs().max():.4g}{'  <== ALL ZEROS' if zero else ''}")
print("mode:", "xnnpack" if USE_XNN else "portable", "BUG" if bug else "ok")
sys.exit(1 if bug else 0)
