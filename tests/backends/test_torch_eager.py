"""torch eager's own behaviour at real sizes: weights cast per op when large, and a long cell's segments told."""
from __future__ import annotations

import torch

from fpdiff.backends.torch_eager import watch_blocks
from fpdiff.runtime import progress


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(4, 8)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return x


def test_each_block_of_the_largest_list_is_a_segment(tmp_path, monkeypatch):
    path = tmp_path / "segment.json"
    monkeypatch.setenv(progress.ENV, str(path))
    m = Stack()
    watch_blocks(m)
    m(torch.randn(2, 4))
    seg = progress.read(path)
    assert seg is not None and (seg.done, seg.total, seg.what) == (3, 3, "layers.2")


def test_nothing_is_hooked_when_nobody_watches(monkeypatch):
    monkeypatch.delenv(progress.ENV, raising=False)
    m = Stack()
    watch_blocks(m)
    assert not any(layer._forward_hooks for layer in m.layers)
