"""OpenVINO CPU: torch.tile(x, ()) of a 0-d tensor (a Tile with empty constant repeats feeding the output) never writes its output. Exit 1: reproduced."""
import sys
import torch, openvino as ov

class TileScalar(torch.nn.Module):
    def forward(self, x):
        return torch.tile(x, ())  # 0-d x: the identity; OpenVINO gets Tile(x, repeats=[] of shape [0])

x = torch.tensor(-4.826984902407649)
model = ov.convert_model(torch.export.export(TileScalar(), (x,)))  # the TorchScript path fails to convert this op
bad = 0
for hint in ["f32", "f16", "bf16"]:
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": hint})
    for v in [x, x + 10]:
        want, got = float(torch.tile(v.double(), ())), float(compiled(v.numpy())[0])
        print(f"{hint:4s} expected (float64) {want:.6f}  openvino {got:.6g}")
        bad += abs(got - want) > 1e-2 * abs(want)
sys.exit(int(bad > 0))
