"""ExecuTorch's XNNPACKQuantizer lifts the scalar of an integer add (position ids computed in the graph, as Hugging
Face models do) into a float32 constant, so prepare_pt2e retypes the indices and the prepared model fails."""
import sys

import torch
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e


class Positions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(12, 8)

    def forward(self, ids):
        return self.emb(ids) + self.emb(torch.arange(ids.shape[1]).unsqueeze(0) + 2)


x = (torch.randint(0, 10, (2, 5)),)
quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
prepared = prepare_pt2e(torch.export.export(Positions().eval(), x).module(), quantizer)
try:
    prepared(*x)
except (RuntimeError, IndexError) as e:
    print(f"FAIL: {str(e).splitlines()[0][:160]}")
    sys.exit(1)
print("OK")
