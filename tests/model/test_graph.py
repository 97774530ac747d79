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
