"""litert-torch's conversion of PyTorch max_pool2d whose padding is nothing on one spatial axis and SAME-like on the
other (kernel 3, stride 2, ceil_mode=True, H odd and W even: the ceil padding is (0, 0) on H and (0, 1) on W) gives a
MAX_POOL_2D with padding SAME on both axes. LiteRT's converter (stablehlo.reduce_window -> tfl.max_pool_2d,
GetTFLPadding) skips the unpadded axis and then calls the whole op SAME; SAME pads H by (1, 1) and gives 2 rows where
PyTorch, and the file's own declared output shape, have 1. LiteRT's own kernels resize the output silently (wrong shape,
wrong values); CompiledModel writes the 2 rows into the output buffer it made for 1 and corrupts the heap (the process
dies by SIGSEGV or SIGABRT, run here in a child).

`python repro.py 1,16,5,65` (both axes odd: VALID) or `1,16,6,64` (both even: SAME on both) is right and exits 0;
`--int8` puts a 1x1 conv before the pool and quantizes it with litert-torch's PT2EQuantizer (static int8): the same
bug, on an int8 MAX_POOL_2D. Exit 1 while the bug is there, 0 when not."""
import contextlib, io, signal, subprocess, sys, tempfile
import numpy as np, torch, torch.nn.functional as F, litert_torch
from ai_edge_litert.interpreter import Interpreter, OpResolverType

SHAPE = next((tuple(int(v) for v in a.split(",")) for a in sys.argv[1:] if "," in a), (1, 16, 3, 64))
INT8 = "--int8" in sys.argv
torch.manual_seed(0)
class M(torch.nn.Module):
    def __init__(s): super().__init__(); s.conv = torch.nn.Conv2d(SHAPE[1], SHAPE[1], 1) if INT8 else torch.nn.Identity()
    def forward(s, x): return F.max_pool2d(s.conv(x), 3, 2, ceil_mode=True)
m, x = M().eval(), torch.randn(*SHAPE)
path = tempfile.mkdtemp() + "/pool.tflite"
with contextlib.redirect_stdout(io.StringIO()):
    if INT8:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
        from litert_torch.quantize.quant_config import QuantConfig
        q = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        p = prepare_pt2e(torch.export.export(m, (x,)).module(), q); p(x)
        model = litert_torch.convert(convert_pt2e(p, fold_quantize=False), (x,), quant_config=QuantConfig(pt2e_quantizer=q))
    else:
        model = litert_torch.convert(m, (x,))
    model.export(path)
want = m(x).detach().numpy()

# LiteRT's own kernels, no delegate
it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
inp, out = it.get_input_details()[0], it.get_output_details()[0]
declared = [int(d) for d in out["shape"]]
it.allocate_tensors()
(s, z), (so, zo) = inp["quantization"], out["quantization"]
it.set_tensor(inp["index"], np.clip(np.rint(x.numpy() / s) + z, -128, 127).astype(np.int8) if INT8 else x.numpy())
it.invoke()
got = it.get_tensor(out["index"])
got = (got.astype(np.float32) - zo) * so if INT8 else got
print(f"input {list(SHAPE)}: PyTorch gives {list(want.shape)}, the file declares {declared}, its "
      f"{'int8' if INT8 else 'float32'} MAX_POOL_2D computes {list(got.shape)}")
shape_bug = got.shape != want.shape
if shape_bug:
    first = got[:, :, :1] if got.shape[2] != want.shape[2] else got[..., :1]
    near = want[:, :, :1] if got.shape[2] != want.shape[2] else want[..., :1]
    tol = 2 * so if INT8 else 1e-6
    print(f"  its first row/column: {int((np.abs(first - near) > tol).sum())} of {near.size} values differ from PyTorch's")

# CompiledModel (XNNPACK), buffers made by name from the file's signature, as an app runs it
CHILD = r"""
import sys, numpy as np
from ai_edge_litert.compiled_model import CompiledModel
m = CompiledModel.from_file(sys.argv[1]); key = next(iter(m.get_signature_list()))
sig, d = m.get_signature_list()[key], m.get_input_tensor_details(key)
ins = {n: m.create_input_buffer_by_name(key, n) for n in sig["inputs"]}
for n, b in ins.items(): b.write(np.ones(d[n]["shape"], d[n]["dtype"]))
outs = {n: m.create_output_buffer_by_name(key, n) for n in sig["outputs"]}
m.run_by_name(key, ins, outs)
for b in [*ins.values(), *outs.values()]: b.destroy()
print("CompiledModel ran", flush=True)
"""
r = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True)
said = [l for l in (r.stdout + r.stderr).splitlines() if "free()" in l or "unlock" in l or "too small" in l][-2:]
how = f"killed by {signal.Signals(-r.returncode).name}" if r.returncode < 0 else f"exit {r.returncode}"
print(f"CompiledModel (XNNPACK): {how}" + (f" ({' | '.join(said)})" if said else ""))
bug = shape_bug or r.returncode != 0
print("BUG" if bug else "ok")
sys.exit(1 if bug else 0)
