"""IREE 3.13 (llvm-cpu): iree-compile fails on a pooling or conv window op when one output spatial
dim is 1 but the input (after padding) is longer than the kernel in that dim.

  error: 'linalg.generic' op inferred input/output operand #1 has shape's dimension #0 to be 4, but found 3

Condition (checked over 123 avg_pool2d shapes with no exception, plus the cases below): some spatial
dim has output size 1, kernel size > 1, and padded input size > kernel size there (which needs
stride > padded_in - k, e.g. in=4, k=3, s=2). It does not need H != W, kernel > input,
count_include_pad or a particular divisor. Smallest case: avg_pool1d(x[1,1,3], kernel=2, stride=2).
max_pool and convolution fail the same way, so this is not the avg-pool divisor code in torch-mlir.
torch-mlir's output is correct (linalg.pooling_nchw_sum, then divide by 9). The failing pass is
iree-dispatch-creation-fold-unit-extent-dims, which calls MLIR's linalg drop-unit-dims patterns: the
unit output loop d2 is replaced by 0 in the input map `d2*2 + d4`, which leaves `d4`, but the input
is not sliced to the kernel size, so d4 gets two different sizes (4 from the input, 3 from the kernel).
The upstream pass alone (iree-opt --linalg-fold-unit-extent-dims) does the same on a 10-line
linalg.generic.

Exit 1 while the bug is there (the fuzzer's case or the smallest case fails with that message);
0 when both compile; 3 if something could not run.
Run: python pool_unit_output_dim.py
"""
import subprocess
import sys

try:
    from iree.compiler.tools.binaries import find_tool
    IC, IOPT = find_tool("iree-compile"), find_tool("iree-opt")
except Exception as e:  # pragma: no cover
    print(f"cannot run: {e}")
    sys.exit(3)

FLAGS = ["--iree-input-type=torch", "--iree-hal-target-device=local",
         "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host"]
SIG = "inferred input/output operand"


def ints(name, vals):
    lines = [f"    %{name}{i} = torch.constant.int {v}" for i, v in enumerate(vals)]
    refs = ", ".join(f"%{name}{i}" for i in range(len(vals)))
    tys = ", ".join(["!torch.int"] * len(vals))
    lines.append(f"    %{name} = torch.prim.ListConstruct {refs} : ({tys}) -> !torch.list<int>")
    return "\n".join(lines)


def t(shape):
    return f"!torch.vtensor<[{','.join(map(str, shape))}],f32>"


def pool(kind, ishape, oshape, k, s, p, ceil=False, cip=True):
    nd = len(k)
    L = "!torch.list<int>"
    if kind == "avg":
        extra = "" if nd == 1 else ", %none"
        extra_t = "" if nd == 1 else ", !torch.none"
        op = (f"torch.aten.avg_pool{nd}d %x, %k, %s, %p, %ceil, %cip{extra} : "
              f"{t(ishape)}, {L}, {L}, {L}, !torch.bool, !torch.bool{extra_t}")
    else:
        op = (f"torch.aten.max_pool{nd}d %x, %k, %s, %p, %d, %ceil : "
              f"{t(ishape)}, {L}, {L}, {L}, {L}, !torch.bool")
    body = "\n".join([ints("k", k), ints("s", s), ints("p", p), ints("d", [1] * nd),
                      f"    %ceil = torch.constant.bool {str(ceil).lower()}",
                      f"    %cip = torch.constant.bool {str(cip).lower()}",
                      "    %none = torch.constant.none"])
    return (f"module {{\n  func.func @main(%x: {t(ishape)}) -> {t(oshape)} {{\n{body}\n"
            f"    %r = {op} -> {t(oshape)}\n    return %r : {t(oshape)}\n  }}\n}}\n")


def conv(ishape, wshape, oshape, s):
    L = "!torch.list<int>"
    body = "\n".join([ints("s", s), ints("p", [0, 0]), ints("d", [1, 1]), ints("op", [0, 0]),
                      "    %f = torch.constant.bool false", "    %g = torch.constant.int 1",
                      "    %none = torch.constant.none"])
    return (f"module {{\n  func.func @main(%x: {t(ishape)}, %w: {t(wshape)}) -> {t(oshape)} {{\n{body}\n"
            f"    %r = torch.aten.convolution %x, %w, %none, %s, %p, %d, %f, %op, %g : {t(ishape)}, "
            f"{t(wshape)}, !torch.none, {L}, {L}, {L}, !torch.bool, {L}, !torch.int -> {t(oshape)}\n"
            f"    return %r : {t(oshape)}\n  }}\n}}\n")


LINALG_ONLY = """
#map = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5)>
#map1 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
#map2 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
func.func @f(%x: tensor<1x1x4x3xf32>, %init: tensor<1x1x1x1xf32>) -> tensor<1x1x1x1xf32> {
  %k = tensor.empty() : tensor<3x3xf32>
  %r = linalg.generic {indexing_maps = [#map, #map1, #map2], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%x, %k : tensor<1x1x4x3xf32>, tensor<3x3xf32>) outs(%init : tensor<1x1x1x1xf32>) {
  ^bb0(%in: f32, %in_1: f32, %out: f32):
    %s = arith.addf %out, %in : f32
    linalg.yield %s : f32
  } -> tensor<1x1x1x1xf32>
  return %r : tensor<1x1x1x1xf32>
}
"""


def compile_(mlir):
    r = subprocess.run([IC, "-", *FLAGS, "-o", "/dev/null"], input=mlir, capture_output=True, text=True)
    err = next((ln.split("error: ", 1)[1] for ln in r.stderr.splitlines() if "error: " in ln), "")
    return r.returncode, err


CASES = [  # (label, mlir, expected to hit the bug per the condition)
    ("fuzzer case: avg_pool2d x[1,1,4,3] k3 s2 p0 -> [1,1,1,1]",
     pool("avg", [1, 1, 4, 3], [1, 1, 1, 1], [3, 3], [2, 2], [0, 0]), True),
    ("smallest: avg_pool1d x[1,1,3] k2 s2 -> [1,1,1]",
     pool("avg", [1, 1, 3], [1, 1, 1], [2], [2], [0]), True),
    ("square: avg_pool2d x[1,1,4,4] k3 s2 -> [1,1,1,1]",
     pool("avg", [1, 1, 4, 4], [1, 1, 1, 1], [3, 3], [2, 2], [0, 0]), True),
    ("only H unit: avg_pool2d x[1,1,3,4] k2 s2 -> [1,1,1,2]",
     pool("avg", [1, 1, 3, 4], [1, 1, 1, 2], [2, 2], [2, 2], [0, 0]), True),
    ("count_include_pad=False: avg_pool2d x[1,1,4,3] k3 s2",
     pool("avg", [1, 1, 4, 3], [1, 1, 1, 1], [3, 3], [2, 2], [0, 0], cip=False), True),
    ("padding: avg_pool2d x[1,1,2,3] k3 s2 p1 (padded H 4 > 3) -> [1,1,1,2]",
     pool("avg", [1, 1, 2, 3], [1, 1, 1, 2], [3, 3], [2, 2], [1, 1]), True),
    ("known: avg_pool3d x[2,3,3,4,4] k2 s2 -> [2,3,1,2,2]",
     pool("avg", [2, 3, 3, 4, 4], [2, 3, 1, 2, 2], [2, 2, 2], [2, 2, 2], [0, 0, 0]), True),
    ("max_pool2d x[1,1,4,3] k3 s2 -> [1,1,1,1]",
     pool("max", [1, 1, 4, 3], [1, 1, 1, 1], [3, 3], [2, 2], [0, 0]), True),
    ("conv2d x[1,1,4,4] w[1,1,3,3] s2 -> [1,1,1,1]",
     conv([1, 1, 4, 4], [1, 1, 3, 3], [1, 1, 1, 1], [2, 2]), True),
    ("control: avg_pool2d x[1,1,3,3] k3 s2 (input == kernel) -> [1,1,1,1]",
     pool("avg", [1, 1, 3, 3], [1, 1, 1, 1], [3, 3], [2, 2], [0, 0]), False),
    ("control: avg_pool2d x[1,1,4,4] k3 s1 -> [1,1,2,2]",
     pool("avg", [1, 1, 4, 4], [1, 1, 2, 2], [3, 3], [1, 1], [0, 0]), False),
    ("control: avg_pool2d x[1,1,4,3] k3 s2 p1 -> [1,1,2,2]",
     pool("avg", [1, 1, 4, 3], [1, 1, 2, 2], [3, 3], [2, 2], [1, 1]), False),
    ("control: avg_pool3d x[2,3,4,4,4] k2 s2 -> [2,3,2,2,2]",
     pool("avg", [2, 3, 4, 4, 4], [2, 3, 2, 2, 2], [2, 2, 2], [2, 2, 2], [0, 0, 0]), False),
]


def main():
    hits = {}
    for label, mlir, predicted in CASES:
        rc, err = compile_(mlir)
        bug = rc != 0 and SIG in err
        hits[label] = bug
        state = f"FAILS: {err}" if rc else "compiles"
        note = "" if bug == predicted else "   <-- differs from the stated condition"
        print(f"{label:70s} {state}{note}")
    r = subprocess.run([IOPT, "-", "--linalg-fold-unit-extent-dims"], input=LINALG_ONLY,
                       capture_output=True, text=True)
    err = next((ln.split("error: ", 1)[1] for ln in r.stderr.splitlines() if "error: " in ln), "")
    print(f"{'upstream pass only: iree-opt --linalg-fold-unit-extent-dims on the generic':70s} "
          f"{'FAILS: ' + err if r.returncode else 'ok'}")
    present = hits[CASES[0][0]] or hits[CASES[1][0]]
    print("BUG PRESENT" if present else "FIXED")
    return 1 if present else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit:
        raise
    except Exception as e:
        import traceback
        traceback.print_exc()
        print(f"cannot run: {type(e).__name__}: {e}")
        sys.exit(3)
