"""ExecuTorch's XNNPACK delegate runs a 4-d `softmax(dim=-1)` whose input comes from a convolution (or a pooling, or
anything its channels-last pass keeps in NHWC) over the channels instead of the last dim (W).

`ChannelsLastTaggedReshapePass` treats `_softmax` as a layout-free op: it keeps the conv's output NHWC and tags the
softmax NHWC, and the softmax visitor emits XNNPACK's softmax, which normalizes the innermost dim of the memory it is
given: C, not W. The partitioner's check (dim must be the last dim) looks at the logical shape only.

Three models, each lowered with `XnnpackPartitioner` and run by the ExecuTorch runtime, against eager PyTorch:
  - float32: Conv2d(3, 2, 1) -> softmax(dim=-1) on a 1x3x4x5 input;
  - int8: the PT2E program (`XNNPACKQuantizer`, per-channel symmetric) of conv2d(1x1x2x2 input, a 2x1x1x1 weight,
    stride 2) -> softmax(dim=3): softmax over a size-1 dim is 1 everywhere, the delegate gives about 0.5;
  - float32 with the workaround: the same softmax on a 3-d view (reshape to N, C*H, W and back): right.
The delegate's wrong output equals softmax over dim 1 of the same input (printed). Exits 1 when the delegate departs
from eager (more than 1e-4) on the first two, 0 when it does not."""
import sys, tempfile, torch
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


def run_et(m, x):
    ep = torch.export.export(m, (x,))
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    delegated = all("softmax" not in str(n.target) for n in edge.exported_program().graph_module.graph.nodes)
    pte = tempfile.mkdtemp() + "/m.pte"
    with open(pte, "wb") as f:
        f.write(edge.to_executorch().buffer)
    return Runtime.get().load_program(pte).load_method("forward").execute([x])[0], delegated


class ConvSoftmax(torch.nn.Module):
    def __init__(s, reshape=False):
        super().__init__(); s.conv = torch.nn.Conv2d(3, 2, 1); s.reshape = reshape

    def forward(s, x):
        y = s.conv(x)
        if s.reshape:  # workaround: a 3-d softmax (the view brings the value back to NCHW first)
            n, c, h, w = y.shape
            return torch.softmax(y.reshape(n, c * h, w), -1).reshape(n, c, h, w)
        return torch.softmax(y, dim=-1)


class FuzzGraph(torch.nn.Module):  # conv2d(x, w, stride=2) -> softmax(dim=3), w a constant weight
    def __init__(s):
        super().__init__(); s.w = torch.nn.Parameter(torch.tensor([1.03566937, 0.86159505]).reshape(2, 1, 1, 1))

    def forward(s, x):
        return torch.softmax(torch.nn.functional.conv2d(x, s.w, stride=2), dim=3)


torch.manual_seed(0)
bad = False
with torch.no_grad():
    # 1. float32
    m = ConvSoftmax().eval(); x = torch.randn(1, 3, 4, 5)
    got, dl = run_et(m, x); want = m(x)
    over_c = torch.softmax(m.conv(x), dim=1)
    d = (got - want).abs().max().item()
    bad |= d > 1e-4
    print(f"float32 conv -> softmax(dim=-1): softmax delegated={dl}  max|ET - eager|={d:.4g}  "
          f"max|ET - softmax over channels|={(got - over_c).abs().max().item():.3g}")
    print("  eager row [0,0,0,:]:", [round(v, 4) for v in want[0, 0, 0].tolist()])
    print("  ET    row [0,0,0,:]:", [round(v, 4) for v in got[0, 0, 0].tolist()])
    # 2. int8 (PT2E, XNNPACKQuantizer): the quantized program, run eagerly, is the reference
    x = torch.tensor([[[[0.12573022, -0.13210486], [0.64042265, 0.10490012]]]])
    gm = torch.export.export(FuzzGraph().eval(), (x,)).module()
    gm = prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    gm(x)
    for _ in range(8):
        gm(torch.randn(1, 1, 2, 2))
    gm = convert_pt2e(gm)
    got, dl = run_et(gm, x); want = gm(x)
    d = (got - want).abs().max().item()
    bad |= d > 1e-4
    print(f"int8 conv(stride 2) -> softmax(dim=3) over a size-1 dim: softmax delegated={dl}  "
          f"quantized program {want.flatten().tolist()}  ET {[round(v, 4) for v in got.flatten().tolist()]}")
    # 3. workaround
    m = ConvSoftmax(reshape=True).eval(); x = torch.randn(1, 3, 4, 5)
    got, dl = run_et(m, x)
    print(f"float32 workaround (3-d softmax): softmax delegated={dl}  max|ET - eager|="
          f"{(got - m(x)).abs().max().item():.3g}")
print("BUG: the delegate's softmax runs over the channels" if bad else "ok")
sys.exit(1 if bad else 0)
