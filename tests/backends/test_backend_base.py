"""backends/base.py's shared helpers, named apart from tests/sources/test_base.py (pytest takes one module per
basename here): reading a quantized cell's own quantizers back on its first run."""
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from fpdiff.backends.base import reading_back
from fpdiff.core.errors import COMPILE, StageError


def _qdq(path):
    inits = [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.uint8(128), "z")]
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                           helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)
    return path


def test_a_marked_program_that_fails_leaves_the_cell_running_unread(tmp_path):
    """The marked program is another program: its compile failure is said, never the cell's own failure."""
    def fails(model, inputs):
        raise StageError(COMPILE, "a compiler", "the marked graph did not compile")
    record, values = {}, {}
    run = reading_back(lambda x: [np.asarray(x)], _qdq(tmp_path / "m.onnx"), record, values, fails)
    assert run(np.zeros(4, np.float32))[0].shape == (4,)
    assert record["read_back"] is False and "did not compile" in record["read_back_failed"] and values == {}


def test_a_marked_program_equal_to_the_cell_hands_its_quantizers_back(tmp_path):
    x = np.array([0.0, 0.1, -0.2, 1.0], np.float32)
    q = np.clip(np.round(x / np.float32(0.1)) + 128, 0, 255).astype(np.uint8)
    y = (q.astype(np.float32) - 128) * np.float32(0.1)
    record, values = {}, {}
    run = reading_back(lambda _: [y], _qdq(tmp_path / "m.onnx"), record, values, lambda m, inputs: [y, q])
    run(x)
    assert record["read_back"] is True and list(values) == ["q"] and np.array_equal(values["q"], q)
