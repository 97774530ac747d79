"""ExecuTorch's XNNPACK delegate converts a quantized NHWC value back to NCHW twice when the value is both a graph
output and the input of another delegated op.

An int8 (PT2E, XNNPACKQuantizer) `y = conv(x); return y, sigmoid(y)`, lowered with XnnpackPartitioner. The conv
keeps `y` NHWC; the sigmoid is tagged NHWC from it. At the graph output `ChannelsLastTaggedReshapePass` gives `y` an
NCHW copy through `insert_copy_q_dq`, whose `before.replace_all_uses_with(dq)` also moves the already-tagged sigmoid
onto the NCHW copy; the pass then converts the sigmoid's output to NCHW again. The second output is a permuted value:
error 0x10 at `execute` where its permuted shape differs (the output resize is refused), wrong numbers where it does
not ([1, 3, 3, 3]). The same model in float32 is right.

Exit status: 1 while the bug reproduces, 0 when every case is right.
"""
import sys
import tempfile

import torch
import executorch.kernels.quantized  # noqa: F401  (the quantized ops' out variants, as ExecuTorch's docs import them)
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer, get_symmetric_quantization_config)
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e


class ConvTwoUses(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 3, 1)

    def forward(self, x):
        y = self.conv(x)
        return y, torch.sigmoid(y)


def run(shape, quantize):
    torch.manual_seed(0)
    x = torch.rand(*shape)
    model = ConvTwoUses().eval()
    ep = torch.export.export(model, (x,))
    ref = model(x)
    if quantize:
        q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(ep.module(), q)
        prepared(x)
        converted = convert_pt2e(prepared)
        ref = converted(x)
        ep = torch.export.export(converted, (x,))
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    path = tempfile.mktemp(suffix=".pte")
    with open(path, "wb") as f:
        f.write(pte.buffer)
    method = Runtime.get().load_program(path).load_method("forward")
    try:
        outs = method.execute([x])
    except RuntimeError as e:
        return f"execute failed: {e}"
    errs = [(o - r).abs().max().item() for o, r in zip(outs, ref)]
    return "right" if max(errs) < 1e-5 else "wrong: max abs error per output " + ", ".join(f"{e:.3f}" for e in errs)


bad = False
for shape in ([1, 2, 3, 4], [1, 2, 3, 3]):
    for quantize in (True, False):
        got = run(shape, quantize)
        print(f"{'int8' if quantize else 'float32':8s} x{shape}  {got}")
        bad |= quantize and got != "right"
sys.exit(1 if bad else 0)
