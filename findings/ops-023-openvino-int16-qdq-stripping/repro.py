"""OpenVINO CPU: a 16-bit QuantizeLinear -> DequantizeLinear pair from a graph input to a graph output fails to compile
("FQ stripping failed"); int8 compiles. With an Abs after it, it compiles but the pair is gone. Exit 1: reproduced."""
import sys, numpy as np, onnx, openvino as ov
from onnx import helper as h, numpy_helper as nh, TensorProto as T
x, s, bad = np.linspace(-3, 3, 64, dtype=np.float32).reshape(4, 16), np.float32(4 / 255), False
for name, elem, dt in (("int8", T.INT8, np.int8), ("int16", T.INT16, np.int16), ("uint16", T.UINT16, np.uint16)):
    for tail in ("", "Abs"):  # "": DequantizeLinear is the graph output; "Abs": one op after it (not counted in the exit code)
        nodes = [h.make_node("QuantizeLinear", ["X", "s", "z"], ["q"]), h.make_node("DequantizeLinear", ["q", "s", "z"], ["d" if tail else "Y"])]
        nodes += [h.make_node(tail, ["d"], ["Y"])] if tail else []
        g = h.make_graph(nodes, "qdq", [h.make_tensor_value_info("X", T.FLOAT, [4, 16])], [h.make_tensor_value_info("Y", T.FLOAT, [4, 16])],
                         [nh.from_array(np.array(s), "s"), nh.from_array(np.array(0, dt), "z")])  # zero point 0
        want = np.clip(np.rint(x / np.float64(s)), np.iinfo(dt).min, np.iinfo(dt).max) * np.float64(s)  # the spec in float64
        want = np.abs(want) if tail else want
        try:
            m = ov.Core().read_model(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]).SerializeToString(), b"")
            got = ov.Core().compile_model(m, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})({"X": x})[0]
            err = np.abs(got - want)
            print(f"{name:6s} Q->DQ{'->' + tail if tail else '':5s}: {int((err > 1e-6).sum())} of 64 differ from the spec, max |diff| {err.max():.3g}")
            bad |= not tail and err.max() > 1e-6
        except RuntimeError as e:
            print(f"{name:6s} Q->DQ{'->' + tail if tail else '':5s}: compile fails:", " ".join(l for l in str(e).splitlines() if "FQ stripping" in l or "Check" in l))
            bad |= not tail
sys.exit(1 if bad else 0)
