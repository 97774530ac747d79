"""ExecuTorch's XNNPACK delegate cannot lower a PT2E int8 program whose quantized op reads a 0-dim (scalar) graph
input: `to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])` fails in XNNPACK's
`ChannelsLastTaggedReshapePass` with `IndexError: invalid index of a 0-dim tensor`, because
`ChannelsLastTaggedReshapePass.is_nhwc_node` reads the layout of a quantized placeholder from
`placeholder.meta["val"][0]` (the tensor's first row), which a 0-dim tensor does not have.

The program is `x + w` (and `x * w`) with x a 0-dim input and w a 0-dim parameter, quantized with
`XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))`. Controls printed: the float
program lowers; the same quantized program with x of shape [1] lowers; the quantized 0-dim program lowers and runs
without the delegate (ExecuTorch's portable and quantized kernels) and matches eager PyTorch. Exits 1 when the
delegate's lowering fails on the 0-dim program, 0 when it lowers and runs it as eager does."""
import sys, tempfile, warnings
import torch
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
import executorch.kernels.quantized  # noqa: F401  (out-variants of q/dq ops, for the run without the delegate)

warnings.filterwarnings("ignore")


class OpWithWeight(torch.nn.Module):
    def __init__(self, op, w):
        super().__init__()
        self.op = op
        self.w = torch.nn.Parameter(w, requires_grad=False)

    def forward(self, x):
        return self.op(x, self.w)


def quantized(m, x):
    gm = torch.export.export(m, (x,)).module()
    gm = prepare_pt2e(gm, XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
    for v in (-2.0, 2.0, 0.5):  # calibration
        gm(torch.full_like(x, v))
    return convert_pt2e(gm)


def lower_and_run(gm, x, delegate):
    ep = torch.export.export(gm, (x,))
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()] if delegate else [])
    pte = tempfile.mkdtemp() + "/m.pte"
    with open(pte, "wb") as f:
        f.write(edge.to_executorch().buffer)
    return Runtime.get().load_program(pte).load_method("forward").execute([x])[0]


def root(e):
    while e.__cause__ is not None:
        e = e.__cause__
    return e


bug = False
for name, op in (("add", torch.add), ("mul", torch.mul)):
    x0, w0 = torch.tensor(1.25), torch.tensor(0.75)  # 0-dim input and parameter
    # control 1: float program, 0-dim, through the delegate
    m = OpWithWeight(op, w0).eval()
    r = lower_and_run(torch.export.export(m, (x0,)).module(), x0, True)
    print(f"{name} float32, x shape []: xnnpack lowers and runs, |diff| vs eager = {(r - m(x0)).abs().item():.3g}")
    # control 2: quantized, x of shape [1]: lowers through the delegate
    x1 = x0.reshape(1)
    g1 = quantized(OpWithWeight(op, w0).eval(), x1)
    r = lower_and_run(g1, x1, True)
    print(f"{name} int8, x shape [1]: xnnpack lowers and runs, |diff| vs eager = {(r - g1(x1)).abs().max().item():.3g}")
    # the case: quantized, x of shape []
    g0 = quantized(OpWithWeight(op, w0).eval(), x0)
    r = lower_and_run(g0, x0, False)
    print(f"{name} int8, x shape []: without the delegate lowers and runs, |diff| vs eager = "
          f"{(r - g0(x0)).abs().item():.3g}")
    try:
        r = lower_and_run(g0, x0, True)
        ok = torch.equal(r, g0(x0))
        print(f"{name} int8, x shape []: xnnpack lowers and runs, {'matches' if ok else 'DIFFERS from'} eager")
        bug |= not ok
    except Exception as e:
        c = root(e)
        print(f"{name} int8, x shape []: xnnpack lowering FAILS: {str(e).splitlines()[0]}\n"
              f"    caused by {type(c).__name__}: {c}")
        bug = True
print("BUG" if bug else "ok")
sys.exit(1 if bug else 0)
