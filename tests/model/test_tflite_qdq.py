"""A quantized .tflite read as the QDQ graph fpdiff emulates: every integer tensor a QuantizeLinear with the file's
own scales, in TFLite's layout; on a real full-integer file made by litert-torch (tests/data), LiteRT itself agrees
with it, and an op it has no emulation of is named."""
import numpy as np
import onnx
import pytest

pytest.importorskip("ai_edge_litert", reason="ai-edge-litert is not installed (pip install 'fpdiff[litert]')")

from conftest import DATA  # noqa: E402
from fpdiff.backends import litert  # noqa: E402
from fpdiff.core.errors import StageError  # noqa: E402
from fpdiff.model import tflite_qdq  # noqa: E402
from fpdiff.onnxtools.emulate import emulate  # noqa: E402

FILE = DATA / "tinycnn_int8.tflite"


def test_the_files_emulation_is_what_litert_computes_tensor_for_tensor(tmp_path):
    names = tflite_qdq.write(FILE, tmp_path / "q.onnx")
    m = onnx.load(str(tmp_path / "q.onnx"))
    onnx.checker.check_model(m)
    view = litert.read_file(FILE)
    shapes = {t["index"]: list(t["shape"]) for t in view.tensors}
    assert tflite_qdq.is_quantized(FILE) == "int8" and len(names) >= 10
    assert tflite_qdq.index_of("serving_default_args_0#0") == 0
    x = np.random.default_rng(0).standard_normal(view.inputs[0].shape).astype(np.float32)
    ins, outs = litert.io_quantization(FILE)
    runner = litert._Runner(FILE, view, False)
    try:
        got = [litert.dequantized(o, q) for o, q in zip(runner([litert.quantized_input(x, ins[0])]), outs)]
    finally:
        runner.close()
    emu = emulate(m, {m.graph.input[0].name: x})
    step = outs[0][0]
    assert np.abs(got[0] - emu.outputs[0]).max() <= step + 1e-9  # a requantization may round a step the other way
    # every quantizer is the file's tensor of that name, in the file's own layout (NHWC)
    inferred = onnx.shape_inference.infer_shapes(m).graph
    typed = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in inferred.value_info}
    for name in names:
        assert typed[name] == shapes[tflite_qdq.index_of(name)], name


def _departure(path, tmp_path, xnnpack):
    """LiteRT's output on `path` against the file's emulation with the ops in `xnnpack` read as XNNPACK's."""
    tflite_qdq.write(path, tmp_path / "d.onnx", xnnpack)
    m = onnx.load(str(tmp_path / "d.onnx"))
    view = litert.read_file(path)
    xs = [np.random.default_rng(1).standard_normal(s.shape).astype(np.float32) for s in view.inputs]
    runner = litert._Runner(path, view, False)
    try:
        got = runner(xs)[0].astype(np.float64)
    finally:
        runner.close()
    emu = emulate(m, {i.name: x for i, x in zip(m.graph.input, xs)}).outputs[0]
    return float(np.linalg.norm(got - emu) / np.linalg.norm(emu))


@pytest.mark.parametrize("name", ["tinyformer_dyn_int4b32.tflite", "tinycnn_dyn_int4.tflite"])
def test_a_dynamic_range_file_quantizes_each_input_as_the_kernel_that_runs_it(tmp_path, name):
    """int4 weights (in blocks of 32 with float16 scales, or per channel) taken by dynamic-range kernels: XNNPACK's
    fully connected quantizes each row asymmetrically; LiteRT's builtin conv (it keeps int4 convs from XNNPACK) each
    batch item. Read as if every op ran on LiteRT's builtin kernels, the departure is a quantization step's."""
    path = DATA / name
    assert tflite_qdq.is_quantized(path) == "int8-dynamic"
    taken, _ = litert.delegated(path, None)
    assert _departure(path, tmp_path, taken) < 1e-6
    assert _departure(path, tmp_path, set()) > 1e-4  # the rule the emulation picks is the one that ran


def test_int4_values_unpack_low_nibble_first_and_sign_extended():
    assert tflite_qdq._unpacked(bytes([0x7F, 0x88, 0x01]), 5).tolist() == [-1, 7, -8, -8, 1]


def test_an_op_fpdiff_cannot_emulate_is_named(tmp_path):
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema
    model = schema.ModelT.InitFromPackedBuf(FILE.read_bytes(), 0)
    code = next(c for c in model.operatorCodes if c.builtinCode == schema.BuiltinOperator.MEAN)
    code.builtinCode = schema.BuiltinOperator.UNSORTED_SEGMENT_SUM  # an op with no emulation here
    code.deprecatedBuiltinCode = schema.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    edited = tmp_path / "edited.tflite"
    edited.write_bytes(builder.Output())
    with pytest.raises(StageError, match="no emulation of TFLite's UNSORTED_SEGMENT_SUM") as e:
        tflite_qdq.write(edited, tmp_path / "q.onnx")
    assert e.value.stage == "emulate"
