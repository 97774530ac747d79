"""A user's converted file matched to the model's inputs: by name, then position; a mismatch is one line."""
import pytest
import torch

from fpdiff.backends.base import Artifact, TensorSpec
from fpdiff.core import precision as prec
from fpdiff.core.errors import UsageError
from fpdiff.runtime.artifacts import feeds, onnx_artifact, order


def art(*specs, precision=prec.FP32):
    return Artifact("model.tflite", [TensorSpec(*s) for s in specs], [], precision, "read from the file")


X, IDS = torch.randn(2, 8), torch.tensor([[1, 2, 3]])


def test_matched_by_name_whatever_the_files_order():
    a = art(("ids", (1, 3), "int32"), ("x", (2, 8), "float16"))
    assert order(["x", "ids"], [X, IDS], a) == [1, 0]
    fed = feeds(["x", "ids"], [X, IDS], a)
    assert fed[0].dtype == torch.int32 and fed[1].dtype == torch.float16
    assert torch.equal(fed[1], X.half())


def test_matched_by_position_when_the_file_names_them_otherwise():
    a = art(("serving_default_x:0", (2, 8), "float32"), ("serving_default_ids:0", (1, 3), "int64"))
    assert order(["x", "ids"], [X, IDS], a) == [0, 1]


def test_a_dynamic_dim_takes_any_size():
    assert order(["x"], [X], art(("x", (None, 8), "float32"))) == [0]


def test_an_onnx_files_dim_of_minus_one_is_dynamic(tmp_path):
    # PaddlePaddle's exports write -1 for a dynamic batch; NNCF keeps it in the graph it quantizes
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 8])])
    onnx.save(helper.make_model(g), tmp_path / "m.onnx")
    a = onnx_artifact(tmp_path / "m.onnx")
    assert a.inputs[0].shape == (None, 8) and order(["x"], [X], a) == [0]


@pytest.mark.parametrize("specs, needle", [
    ([("x", (2, 8), "float32")], "takes 1 inputs (x); the model has 2 (x, ids)"),
    ([("x", (2, 9), "float32"), ("ids", (1, 3), "int64")], "input 'x' is 2x9; the model's 'x' is 2x8"),
    ([("x", (2, 8), "int8"), ("ids", (1, 3), "int64")], "input 'x' is int8; the model's 'x' is float32"),
    ([("x", (2, 8), "float32"), ("ids", (1, 3), "float32")], "input 'ids' is float32; the model's 'ids' is int64"),
    ([("x", (2, 8, 1), "float32"), ("ids", (1, 3), "int64")], "input 'x' is 2x8x1"),
])
def test_a_mismatch_is_one_line(specs, needle):
    with pytest.raises(UsageError, match="") as e:
        order(["x", "ids"], [X, IDS], art(*specs))
    assert needle in str(e.value) and "\n" not in str(e.value)
