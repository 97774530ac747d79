"""ONNX sources: old opsets converted and checked by a witness that runs both graphs, anonymous dims, strings."""
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

from fpdiff.core.errors import ReferenceFailed, UsageError
from fpdiff.sources.onnx_file import load_onnx
from fpdiff.sources.opset import REF_WITNESS, upgrade

DATA = Path(onnx.__file__).parent / "backend/test/data"


def test_opset6_graph_onnx_runtime_cannot_load_is_converted_and_checked_on_the_reference_evaluator(tmp_path):
    # ONNX Runtime has no BatchNormalization-6 kernel: the conversion used to be kept unchecked (and the original
    # kept), so ORT and IREE failed on it
    case = DATA / "pytorch-converted/test_BatchNorm2d_eval"
    model = onnx.load(str(case / "model.onnx"))
    x = numpy_helper.to_array(onnx.load_tensor(str(case / "test_data_set_0/input_0.pb")))
    new, path, note = upgrade(model, {model.graph.input[0].name: x}, tmp_path, "bn")
    assert note["status"] == "converted" and note["checked_on"] == REF_WITNESS and note["check_rel_l2"] <= 1e-12
    assert path.exists() and max(o.version for o in new.opset_import if o.domain in ("", "ai.onnx")) == 21


def test_anonymous_dims_take_a_shape_from_the_command_line(tmp_path):
    x = helper.make_tensor_value_info("x", TP.FLOAT, [-1, 3])  # exporters write -1 or nothing for "any"
    x.type.tensor_type.shape.dim.add()  # a third dim with neither value nor name
    y = helper.make_tensor_value_info("y", TP.FLOAT, ["a", "b", "c"])
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 21)])
    path = tmp_path / "anon.onnx"
    onnx.save(m, str(path))
    with pytest.raises(UsageError, match="--shape x="):
        load_onnx(path, inputs=None, shapes={}, seed=0)
    src = load_onnx(path, inputs=None, shapes={"x": [2, 3, 4]}, seed=0)
    assert src.inputs[0].shape == (2, 3, 4)


def test_string_inputs_get_one_answer_whichever_way_inputs_come(tmp_path):
    s = helper.make_tensor_value_info("s", TP.STRING, [2])
    m = helper.make_model(helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "g", [s],
                                            [helper.make_tensor_value_info("t", TP.STRING, [2])]),
                          opset_imports=[helper.make_opsetid("", 21)])
    path = tmp_path / "strings.onnx"
    onnx.save(m, str(path))
    npz = tmp_path / "in.npz"
    np.savez(npz, s=np.array(["a", "b"]))
    messages = set()
    for inputs in (None, str(npz)):
        with pytest.raises(UsageError) as e:
            load_onnx(path, inputs=inputs, shapes={}, seed=0)
        messages.add(str(e.value))
    assert len(messages) == 1 and "takes strings" in messages.pop()


def test_without_onnxruntime_the_conversion_is_checked_on_the_reference_evaluator(tmp_path, monkeypatch):
    """onnxruntime is an extra: where it is not installed, the float64 evaluator checks the conversion, and says so."""
    import sys

    import onnx_models as om
    from fpdiff.sources.opset import ORT_WITNESS
    model = om.OLD_OPSET["clip-6"]()
    x = np.random.default_rng(0).standard_normal((3, 7)).astype(np.float32)
    feeds = {model.graph.input[0].name: x}
    _, _, note = upgrade(model, feeds, tmp_path, "clip")
    assert note["checked_on"] == ORT_WITNESS, note  # the child interpreter ran onnxruntime
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails, as when it is missing
    _, _, note = upgrade(model, feeds, tmp_path, "clip")
    assert note["status"] == "converted" and note["checked_on"] == REF_WITNESS, note


def test_an_op_the_reference_evaluator_has_no_kernel_for_is_one_typed_line():
    from fpdiff.onnxtools.graph import float64_values
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2])
    m = helper.make_model(helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="my.ops")], "g", [x],
                                            [helper.make_tensor_value_info("y", TP.FLOAT, [2])]),
                          opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("my.ops", 1)])
    with pytest.raises(ReferenceFailed, match="cannot run this model: NotImplementedError") as e:
        float64_values(m, {"x": np.ones(2, np.float32)})
    assert "\n" not in str(e.value)
