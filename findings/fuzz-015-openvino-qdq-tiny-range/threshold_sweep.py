"""Bisects, for each uint8 zero point, the largest scale at which OpenVINO CPU (ov.convert_model, f32 hint) gets
X -> QuantizeLinear -> DequantizeLinear -> Y wrong by more than half a step; prints what it returns instead."""
import os, tempfile, numpy as np, onnx, openvino as ov
from onnx import helper as h, numpy_helper as nh, TensorProto as T
tmp = tempfile.mkdtemp()
def steps(s, zp):  # OpenVINO's output and the spec's, in units of s, on a grid of codes 0, 16, ..., 240
    g = h.make_graph([h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
                      h.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], "qdq",
                     [h.make_tensor_value_info("x", T.FLOAT, [1, 16])], [h.make_tensor_value_info("y", T.FLOAT, [1, 16])],
                     [nh.from_array(np.array(s, np.float32), "s"), nh.from_array(np.array(zp, np.uint8), "z")])
    path = os.path.join(tmp, "qdq.onnx"); onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 21)]), path)
    s64 = np.float64(np.float32(s)); x = ((np.arange(0, 256, 16) - zp) * s64).astype(np.float32).reshape(1, 16)
    got = ov.Core().compile_model(ov.convert_model(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})([x])[0]
    return got.ravel() / s64, (np.clip(np.rint(x / s64) + zp, 0, 255) - zp).ravel()
bad = lambda s, zp: np.abs(np.subtract(*steps(s, zp))).max() > 0.5
print("zp   wrong at s <=   right at s >=   zp*s (= |output_low|)   OpenVINO/s at codes 0, 16, 32 (spec)")
for zp in [0, 1, 64, 100, 127, 128, 129, 200, 254, 255]:
    lo, hi = 1e-10, 1e-5
    if not bad(lo, zp):
        print(f"{zp:3d}  never wrong (checked down to s = 1e-10)"); continue
    for _ in range(30):
        mid = np.sqrt(lo * hi); lo, hi = (mid, hi) if bad(mid, zp) else (lo, mid)
    o, w = steps(lo, zp)
    print(f"{zp:3d}  {lo:.6g}     {hi:.6g}     {zp * hi:.4g}      {np.round(o[:3], 1)} ({w[:3]})")
