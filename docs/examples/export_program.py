"""An exported program as torch.export.save writes one: tinycnn.pt2, example:tinycnn with its batch dynamic (1 to
64) and its example inputs saved with it, for `fpdiff check tinycnn.pt2`."""
import torch

from fpdiff.examples import tinycnn

torch.manual_seed(0)
batch = torch.export.Dim("batch", min=1, max=64)
program = torch.export.export(tinycnn.model().eval(), tinycnn.inputs(), dynamic_shapes=({0: batch},))
torch.export.save(program, "tinycnn.pt2")
