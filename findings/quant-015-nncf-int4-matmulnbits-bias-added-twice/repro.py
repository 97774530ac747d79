"""NNCF's ONNX weight compression to INT4 (opset < 21, group_size > 0) replaces MatMul(x, W) with a com.microsoft
MatMulNBits node, gives it the bias of the Add that follows as its input 5, and keeps that Add: the bias is added
twice. Needs numpy, onnx, onnxruntime, nncf. Exits 1 while the bias is doubled.
  --gemm     the layer as one Gemm(x, W^T, b, transB=1), 2-D input (not affected: the Gemm is replaced)
  --no-add   MatMul without an Add (not affected: no bias)
  --int8     INT8_ASYM, per channel (not affected: DequantizeLinear, no MatMulNBits)
  --opset21  opset 21 (not affected: blockwise DequantizeLinear, no MatMulNBits)"""
import sys, numpy as np, onnx, onnxruntime as ort, nncf
from onnx import helper as h, numpy_helper as nh, TensorProto as T

GEMM, NO_ADD, INT8 = "--gemm" in sys.argv, "--no-add" in sys.argv, "--int8" in sys.argv
OPSET = 21 if "--opset21" in sys.argv else 18
rng = np.random.default_rng(0)
W = rng.standard_normal((64, 32)).astype(np.float32) * 0.1
b = rng.standard_normal(32).astype(np.float32) * 5
shape = [32, 64] if GEMM else [2, 16, 64]
if GEMM:
    inits = [nh.from_array(np.ascontiguousarray(W.T), "W"), nh.from_array(b, "b")]
    nodes = [h.make_node("Gemm", ["x", "W", "b"], ["y"], name="fc", transB=1)]
elif NO_ADD:
    inits, nodes = [nh.from_array(W, "W")], [h.make_node("MatMul", ["x", "W"], ["y"], name="fc")]
else:
    inits = [nh.from_array(W, "W"), nh.from_array(b, "b")]
    nodes = [h.make_node("MatMul", ["x", "W"], ["t"], name="fc"), h.make_node("Add", ["t", "b"], ["y"], name="add")]
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, shape)],
                 [h.make_tensor_value_info("y", T.FLOAT, shape[:-1] + [32])], inits)
model = h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], ir_version=10)
onnx.checker.check_model(model)

if INT8:  # INT8 modes refuse all_layers / backup_mode / group_size
    cm = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
else:
    cm = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT4_SYM, group_size=32, ratio=1.0,
                               all_layers=True, backup_mode=nncf.BackupMode.NONE)

def run(m, x):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
rel = lambda a, r: float(np.linalg.norm(a - r) / np.linalg.norm(r))
x = rng.standard_normal(shape).astype(np.float32)
ref = run(model, x)
print("nncf", nncf.__version__, "onnx", onnx.__version__, "onnxruntime", ort.__version__, "opset", OPSET)
print("compressed graph:", [n.op_type for n in cm.graph.node])
print(f"rel L2, compressed vs float:                      {rel(run(cm, x), ref):.4f}")

nb = [n for n in cm.graph.node if n.op_type == "MatMulNBits"]
if not nb:
    print("no MatMulNBits node: not this pattern"); sys.exit(0)
n = nb[0]
print("MatMulNBits inputs:", list(n.input))
# the graph's own int4 weights, dequantized as MatMulNBits defines them: B [N, K/bs, bs/2] uint8, low nibble first,
# no zero point -> 8; scales [N * K/bs]
init = {i.name: nh.to_array(i) for i in cm.graph.initializer}
bs, K, N = [next(a.i for a in n.attribute if a.name == k) for k in ("block_size", "K", "N")]
B = init[n.input[1]]
q = np.stack([B & 15, B >> 4], -1).reshape(N, -1, bs).astype(np.float32)
zp = 8.0  # NNCF writes no zero point for INT4_SYM
Wdq = ((q - zp) * init[n.input[2]].reshape(N, -1, 1)).reshape(N, -1)[:, :K].T
print(f"rel L2 expected from the int4 weights, bias once:  {rel(x @ Wdq + (0 if NO_ADD else b), ref):.4f}")

bias_in = n.input[5] if len(n.input) > 5 else ""
adds = [a for a in cm.graph.node if a.op_type == "Add" and n.output[0] in a.input and bias_in in a.input]
print("MatMulNBits bias input:", repr(bias_in), "| an Add of the same bias follows it:", bool(bias_in and adds))
bug = bool(bias_in and adds)
if bug:
    del n.input[3:]  # drop the empty zero point and g_idx, and the bias
    print(f"rel L2, MatMulNBits' bias input removed:           {rel(run(cm, x), ref):.4f}")
print("REPRODUCED: the bias is added twice" if bug else "not reproduced: the bias is added once")
sys.exit(1 if bug else 0)
