"""ExecuTorch's XNNPACK delegate reads a quantized channels-last input as NCHW and converts it to NHWC a second time.

An int8 (PT2E, XNNPACKQuantizer) `x + w`, `x` a channels-last graph input, lowered with XnnpackPartitioner.
`ChannelsLastTaggedReshapePass.is_nhwc_node` finds the layout of a dequantize(quantize(placeholder)) from
`placeholder.meta["val"][0]`, a 3-d slice, which is never channels-last: the add is taken as NCHW and its output is
given a channels-last copy although it is NHWC already. Shapes whose permuted form differs fail at `execute` with
error 0x10 (the output resize is refused); a [1, 2, 2, 2] input runs and returns the values permuted.
The same program in float32 through the delegate is right (the control printed beside each case).

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


class AddW(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([-0.5]))

    def forward(self, x):
        return x + self.w


def run(shape, quantize, delegate=True):
    torch.manual_seed(0)
    x = torch.randn(*shape).contiguous(memory_format=torch.channels_last)
    model = AddW().eval()
    ep = torch.export.export(model, (x,))
    ref = model(x)
    if quantize:
        q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(ep.module(), q)
        prepared(x)
        converted = convert_pt2e(prepared)
        ref = converted(x)
        ep = torch.export.export(converted, (x,))
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()] if delegate else []).to_executorch()
    path = tempfile.mktemp(suffix=".pte")
    with open(path, "wb") as f:
        f.write(pte.buffer)
    method = Runtime.get().load_program(path).load_method("forward")
    try:
        out = method.execute([x])[0]
    except RuntimeError as e:
        return f"execute failed: {e}"
    err = (out - ref).abs().max().item()
    return "right" if err < 1e-5 else f"wrong: max abs error {err:.3f}"


bad = False
for shape in ([2, 2, 3, 4], [1, 2, 2, 2]):
    for quantize, delegate in ((True, True), (False, True)):
        got = run(shape, quantize, delegate)
        label = f"{'int8' if quantize else 'float32'} {'XNNPACK' if delegate else 'no delegate'} x{shape}"
        print(f"{label:40s} {got}")
        bad |= quantize and got != "right"
sys.exit(1 if bad else 0)
