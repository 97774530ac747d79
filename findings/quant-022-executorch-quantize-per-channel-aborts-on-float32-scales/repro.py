"""ExecuTorch's portable `quantize_per_channel.out` kernel asserts that its scales are float64, and aborts the whole
process (SIGABRT) on the float32 scales a PT2E program holds. Reached when XNNPACK leaves a per-channel quantize to
the portable kernels: here a conv whose weight is an activation (conv2d(x, x)), which XNNPACKQuantizer quantizes
per channel as any conv weight and XNNPACK's partitioner does not take. The script runs the program in a child
process and exits 1 when the child dies by a signal, 0 when it runs."""
import os, signal, subprocess, sys, tempfile

if os.environ.get("CHILD") != "1":
    child = subprocess.run([sys.executable, __file__], env={**os.environ, "CHILD": "1"}, capture_output=True, text=True)
    tail = [ln for ln in child.stderr.splitlines() if "assert failed" in ln or "op_quantize" in ln]
    if child.returncode < 0:
        print(f"BUG: the runtime died by {signal.Signals(-child.returncode).name}: {' | '.join(tail)[:300]}")
        sys.exit(1)
    print(child.stdout.strip()[-300:] or child.stderr.strip()[-300:]); sys.exit(0 if child.returncode == 0 else 2)

import torch
import torch.nn.functional as F
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
import executorch.kernels.quantized  # noqa: F401  (out variants of the quantized ops, as the docs have users do)


class M(torch.nn.Module):
    def forward(self, x):
        return F.conv2d(x, x, stride=2)


x = torch.full((1, 1, 1, 1), 0.7)
gm = prepare_pt2e(torch.export.export(M(), (x,)).module(),
                  XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True)))
gm(x)
gm = convert_pt2e(gm)
edge = to_edge_transform_and_lower(torch.export.export(gm, (x,)), partitioner=[XnnpackPartitioner()])
pte = tempfile.mkdtemp() + "/m.pte"
with open(pte, "wb") as f:
    f.write(edge.to_executorch().buffer)
print("ran:", Runtime.get().load_program(pte).load_method("forward").execute([x])[0].flatten().tolist())
