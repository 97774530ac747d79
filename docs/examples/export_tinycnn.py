"""Converts example:tinycnn to ONNX yourself, as a user ships it: tinycnn.onnx, the weights fpdiff builds for
example:tinycnn (model() under --seed 0)."""
import torch

from fpdiff.examples import tinycnn

torch.manual_seed(0)
model = tinycnn.model().eval()
torch.onnx.export(model, tinycnn.inputs(), "tinycnn.onnx", dynamo=True, input_names=["x"])
