import pytest
import torch
from torch.export import Dim

from fpdiff.model import graph


def test_no_dynamic_shapes_means_static_only():
    assert [v.name for v in graph.variants(None)] == ["static"]


def test_two_dims_give_static_dynamic_and_each_mixed():
    a, b = Dim("a"), Dim("b")
    names = [v.name for v in graph.variants({"x": {0: a, 1: b}})]
    assert names == ["static", "dynamic", "mixed:a-static", "mixed:b-static"]


def test_three_dims_give_all_proper_subsets_and_four_each_alone():
    spec3 = {"x": {0: Dim("a"), 1: Dim("b")}, "y": {0: Dim("c")}}
    assert len(graph.variants(spec3)) == 2 + 6
    spec4 = {"x": {0: Dim("a"), 1: Dim("b"), 2: Dim("c"), 3: Dim("d")}}
    assert len(graph.variants(spec4)) == 2 + 4


def test_variant_marks_its_static_dims_static():
    a, b = Dim("a"), Dim("b")
    spec = {"x": {0: a, 1: b}, "y": (a, None)}
    v = graph.find_variant(spec, "mixed:a-static")
    static = Dim.STATIC
    assert v.as_dynamic_shapes(spec) == {"x": {0: static, 1: b}, "y": (static, None)}
    assert graph.dynamic_dims(spec, ["x", "y"], v) == [[1], []]


def test_a_traced_graph_goes_to_another_device_whole():
    """An exported graph writes the device it was traced on into its factory ops (an attention bias made with
    device=x.device becomes device=cpu): moved to another device (meta here; cuda in plan's trials on a GPU), those
    move too, or the graph mixes devices."""
    class Biased(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x, mask):
            keep = mask.to(x.device, torch.bool)  # aten.to.device: the device as an argument
            return (self.linear(x) + torch.full((x.shape[0], 4), -1.0, device=x.device)) * keep

    program = torch.export.export(Biased(), (torch.randn(2, 4), torch.ones(2, 4)))
    x, mask = torch.randn(2, 4, device="meta"), torch.ones(2, 4, device="meta")
    with pytest.raises(RuntimeError, match="device|meta tensor"):  # what a plain .to() leaves: the bias made, the
        program.module().to("meta")(x, mask)  # mask copied, on the CPU
    moved = graph.to_device(program.module(), "meta")
    assert moved(x, mask).device.type == "meta"
    assert not [n for n in moved.graph.nodes for a in (*n.args, *n.kwargs.values()) if a == torch.device("cpu")]
    cpu = program.module()
    assert graph.to_device(cpu, "cpu") is cpu  # the CPU a graph was traced on: nothing to rewrite
