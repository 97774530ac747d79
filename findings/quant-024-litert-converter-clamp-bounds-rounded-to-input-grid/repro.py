"""litert-torch's converter computes a `clamp` that its own PT2EQuantizer leaves float (after a quantized `mul`) in
int8 on the mul's grid: MAXIMUM and MINIMUM with the bounds rounded to that grid as int8 constants, and the output
at the mul's scale. Where the clamp is active the quantized program gives the bound exactly; the .tflite gives the
nearest grid point, up to half a step of the mul's scale away: 0.802 comes back as 0.7996 on a fine grid (w = 1.7,
step 0.04); on a coarse one (w = 150, step 3.5) both bounds round to 0 and every output is 0.

The model is clamp(w * x, -1.684, 0.802) with w a constant weight (a module parameter), quantized with
PT2EQuantizer(get_symmetric_quantization_config(is_per_channel=True)), calibrated on fixed inputs,
convert_pt2e(fold_quantize=False), converted with QuantConfig(pt2e_quantizer=...) and run by ai_edge_litert, with
XNNPACK (the default) and with the builtin kernels only; the input is quantized and the output dequantized with the
file's own scales. The reference is the converted PT2E program run eagerly. Exits 1 when the file's output departs
from the program's where the clamp holds it at a bound (more than 1e-4 relative), 0 when it does not."""
import contextlib, io, sys, tempfile
import numpy as np, torch
import litert_torch
from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
from litert_torch.quantize.quant_config import QuantConfig
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e
from ai_edge_litert.interpreter import Interpreter, OpResolverType

LO, HI = -1.684, 0.802


class M(torch.nn.Module):
    def __init__(s, w):
        super().__init__(); s.w = torch.nn.Parameter(torch.tensor([[[w]]]))

    def forward(s, x):
        return torch.clamp(s.w * x, LO, HI)


def convert(w):
    x0 = torch.tensor([0.3])
    q = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    gm = prepare_pt2e(torch.export.export(M(w).eval(), (x0,)).module(), q)
    with torch.no_grad():
        for v in torch.linspace(-3, 3, 13):
            gm(v.reshape(1))
    program = convert_pt2e(gm, fold_quantize=False)
    path = tempfile.mkdtemp() + "/m.tflite"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        litert_torch.convert(program, (x0,), quant_config=QuantConfig(pt2e_quantizer=q)).export(path)
    return program, path


def run(path, x, resolver):
    it = Interpreter(model_path=path, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    i, o = it.get_input_details()[0], it.get_output_details()[0]
    s, z = i["quantization"]
    it.set_tensor(i["index"], np.clip(np.rint(x / s) + z, -128, 127).astype(np.int8).reshape(i["shape"]))
    it.invoke()
    s, z = o["quantization"]
    return float((it.get_tensor(o["index"]).astype(np.float64) - z).ravel()[0] * s), it


bad = False
for w in (1.7, 150.0):
    program, path = convert(w)
    _, it = run(path, 0.0, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ops = it._get_ops_details()
    tensors = it.get_tensor_details()
    bounds = []
    for op in ops:
        if op["op_name"] in ("MAXIMUM", "MINIMUM"):
            t = tensors[op["inputs"][1]]; s, z = t["quantization"]
            v = int(it.get_tensor(t["index"]).ravel()[0])
            bounds.append(f"{op['op_name']}({v} -> {(v - z) * s:.6g})")
    mul = next(tensors[op["outputs"][0]]["quantization"] for op in ops if op["op_name"] == "MUL")
    print(f"w={w}: file ops {[op['op_name'] for op in ops]}; mul output scale {mul[0]:.4g} zero point {mul[1]}; "
          f"clamp bounds in the file: {', '.join(bounds)} (the program's: {LO}, {HI})")
    for x in (-1.2, 1.0):
        want = float(program(torch.tensor([x])).ravel()[0])
        for name, resolver in (("XNNPACK", OpResolverType.AUTO),
                               ("builtin", OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)):
            got, _ = run(path, x, resolver)
            rel = abs(got - want) / abs(want)
            at_bound = want in (np.float32(LO), np.float32(HI))
            bad |= at_bound and rel > 1e-4
            print(f"  x={x:5}: program {want:.6g}  LiteRT ({name}) {got:.6g}  relative {rel:.3g}"
                  f"{'  <== the clamp bound moved' if at_bound and rel > 1e-4 else ''}")
print("BUG: the converter rounds the float clamp's bounds to its input's int8 grid" if bad else "ok")
sys.exit(1 if bad else 0)
