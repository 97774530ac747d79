"""ExecuTorch XNNPACK: SiLU followed by a dynamically quantized Conv2d lowers, but execute() fails with
"Propagating input shapes failed with code: xnn_status_invalid_parameter". Static int8 runs the same model."""
import sys, tempfile
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

torch.manual_seed(0)
model, x = torch.nn.Sequential(torch.nn.SiLU(), torch.nn.Conv2d(32, 32, 1)).eval(), (torch.randn(1, 32, 16, 16),)
q = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True))
prepared = prepare_pt2e(torch.export.export(model, x).module(), q); prepared(*x)
converted = convert_pt2e(prepared)
pte = to_edge_transform_and_lower(torch.export.export(converted, x), partitioner=[XnnpackPartitioner()]).to_executorch()
path = tempfile.mktemp(suffix=".pte"); open(path, "wb").write(pte.buffer)
try:
    out = Runtime.get().load_program(path).load_method("forward").execute(list(x))[0]
except RuntimeError as e:
    print(f"FAIL: {e} (eager converted module runs, finite: {torch.isfinite(converted(*x)).all().item()})"); sys.exit(1)
print("OK: max |executorch - eager converted| =", (out - converted(*x)).abs().max().item())
