"""OpenVINO 2026.4's CPU plugin dies with SIGSEGV inside compile_model (a graph transformation of its f32 pipeline)
on a small residual MLP with static shapes: two blocks of MatMul -> ReLU -> MatMul with a residual add, batch 4 to
8, width 32, hidden 48, INFERENCE_PRECISION_HINT f32. The same model compiles with a dynamic batch, at bf16 or f16,
at batch 1, 2, 16 or 64, and with SNIPPETS_MODE=DISABLE. Built with OpenVINO's own opset, no torch involved.

Run: python openvino_static_mlp.py   (needs openvino). Prints what fails; exits 1 while it does.
"""
import subprocess
import sys

COMPILE = """
import sys
import openvino as ov
import openvino.opset13 as ops

batch, hint = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
x = ops.parameter([int(batch) if batch != "?" else -1, 32], np.float32, name="x")
h = x
for _ in range(2):
    up = ops.relu(ops.add(ops.matmul(h, rng.standard_normal((32, 48)).astype(np.float32), False, False),
                          rng.standard_normal(48).astype(np.float32)))
    h = ops.add(h, ops.add(ops.matmul(up, rng.standard_normal((48, 32)).astype(np.float32), False, False),
                           rng.standard_normal(32).astype(np.float32)))
ov.Core().compile_model(ov.Model([h], [x]), "CPU", {"INFERENCE_PRECISION_HINT": hint})
"""


def compiles(batch: str, hint: str) -> str:
    r = subprocess.run([sys.executable, "-c", COMPILE, batch, hint], capture_output=True, text=True, timeout=300)
    return "compiles" if r.returncode == 0 else f"FAILS (exit {r.returncode})"


def main() -> int:
    cases = [("8", "f32"), ("4", "f32"), ("?", "f32"), ("16", "f32"), ("8", "bf16")]
    results = {c: compiles(*c) for c in cases}
    for (batch, hint), what in results.items():
        print(f"batch {batch:>2}, {hint:>4}: {what}")
    if any(w != "compiles" for w in results.values()):
        print("OpenVINO's CPU plugin crashes compiling static small-batch f32 residual MLPs")
        return 1
    print("all compile (fixed in this version)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
