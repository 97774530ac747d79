"""litert-torch cannot convert `F.conv_transpose2d` with stride > 1 and a padding that is neither 0 nor TFLite's
SAME shape: `litert_torch.convert` fails in the converter passes with "failed to legalize operation
'mhlo.convolution' that was explicitly marked illegal". The lowering (backend/lowerings/_convolution.py,
build_transpose_conv) writes the transposed conv as a `stablehlo.convolution` with lhs_dilation = stride and
symmetric padding dilation*(k-1) - padding (output_padding as a separate pad after it); the converter turns such a
convolution into TRANSPOSE_CONV only when that padding is VALID's (k-1, output (in-1)*stride + k) or the output is
in*stride (SAME), and has no other rule for it.

The model: x [1, 3, 4, 4] -> conv_transpose2d(weight [3, 3, 3, 3], bias [3], stride=2, padding=2,
output_padding=1), weight and bias parameters. It fails in float32, and the same through litert-torch's PT2E flow
(PT2EQuantizer, get_symmetric_quantization_config(is_per_channel=True), prepare_pt2e, calibration,
convert_pt2e(fold_quantize=False), QuantConfig(pt2e_quantizer=...)), where the quantizer leaves the op float (it
annotates conv1d, conv2d and convolution, not conv_transpose2d): the int8 failure is the float one. Controls
printed: padding 0 (VALID), kernel 4 / padding 1 (SAME), stride 1, and the same op written as a padding-0
conv_transpose2d followed by the crop that `padding` means all convert and match eager. Exits 1 when the float
conversion of the model fails, 0 when it converts and matches eager."""
import contextlib, io, re, sys, warnings
import numpy as np
import torch
import torch.nn.functional as F
import litert_torch
from litert_torch.quantize.pt2e_quantizer import PT2EQuantizer, get_symmetric_quantization_config
from litert_torch.quantize.quant_config import QuantConfig
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e, convert_pt2e

warnings.filterwarnings("ignore")
torch.manual_seed(0)
x = torch.randn(1, 3, 4, 4)


class ConvT(torch.nn.Module):
    def __init__(self, k=3, crop=None, **kw):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 3, k, k), requires_grad=False)
        self.b = torch.nn.Parameter(torch.randn(3), requires_grad=False)
        self.kw, self.crop = kw, crop

    def forward(self, x):
        y = F.conv_transpose2d(x, self.w, self.b, **self.kw)
        if self.crop is not None:  # padding p, output_padding op: drop p at the start, p - op at the end
            lo, hi = self.crop
            y = y[:, :, lo:y.shape[2] - hi, lo:y.shape[3] - hi]
        return y


def convert(m, quantize=False):
    """(max |litert - eager|, None) or (None, the error's first line)."""
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            if quantize:
                q = PT2EQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
                gm = prepare_pt2e(torch.export.export(m, (x,)).module(), q)
                for _ in range(4):
                    gm(torch.randn(1, 3, 4, 4))
                gm = convert_pt2e(gm, fold_quantize=False)
                n_q = sum("quantize_per" in str(n.target) for n in gm.graph.nodes)
                print(f"    (the PT2E program holds {n_q} quantize/dequantize ops)", file=sys.__stdout__)
                edge = litert_torch.convert(gm, (x,), quant_config=QuantConfig(pt2e_quantizer=q))
                ref = gm(x)
            else:
                edge = litert_torch.convert(m, (x,))
                ref = m(x)
            got = torch.from_numpy(np.asarray(edge(x.numpy())))
        return float((got - ref).abs().max()), None
    except Exception as e:
        text = " ".join(str(e).split())
        at = text.find("error:")
        if at < 0:
            return None, text[:200]
        said = text[at:].split(":", 2)[1].strip()  # the message, before the op's text
        attrs = re.findall(r"(lhs_dilation = dense<\d+>|padding = dense<[^>]*>)[^,]*", text)
        shapes = re.search(r": \((tensor<[^)]*)\) -> (tensor<[^ ]*>)", text)
        return None, f"{said} ({', '.join(attrs)}{'; ' + shapes.group(1) + ' -> ' + shapes.group(2) if shapes else ''})"


def show(name, result):
    diff, err = result
    print(f"{name}: " + (f"converts, max |litert - eager| = {diff:.3g}" if err is None else f"FAILS: {err}"))
    return err is None and diff < 1e-4


torch.manual_seed(1)
case = ConvT(stride=2, padding=2, output_padding=1).eval()
ok = show("conv_transpose2d k=3 stride=2 padding=2 output_padding=1, float32", convert(case))
show("the same through litert-torch's PT2E int8 flow", convert(case, quantize=True))
for label, m in [("k=3 stride=2 padding=0 (VALID)", ConvT(stride=2)),
                 ("k=3 stride=2 padding=0 output_padding=1", ConvT(stride=2, output_padding=1)),
                 ("k=4 stride=2 padding=1 (SAME: output = 2 x input)", ConvT(k=4, stride=2, padding=1)),
                 ("k=3 stride=1 padding=2", ConvT(stride=1, padding=2)),
                 ("k=3 stride=2 padding=1", ConvT(stride=2, padding=1)),
                 ("k=3 stride=2 padding=1 output_padding=1", ConvT(stride=2, padding=1, output_padding=1))]:
    show(f"  {label}, float32", convert(m.eval()))
wa = ConvT(stride=2, crop=(2, 1)).eval()
wa.load_state_dict(case.state_dict())
print(f"  workaround (padding 0, then the crop) equals the model in eager: {torch.equal(wa(x), case(x))}")
show("  workaround, float32", convert(wa))
print("BUG" if not ok else "ok")
sys.exit(0 if ok else 1)
