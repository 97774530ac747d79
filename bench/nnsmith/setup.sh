#!/usr/bin/env bash
# Builds a separate venv with NNSmith (PyPI), torch 2.13.0 (CPU wheel) and the onnx/onnxruntime that fpdiff pins,
# so NNSmith's test rate on ONNX Runtime is measured on the same ORT build as fpdiff's.
# Usage: bench/nnsmith/setup.sh [VENV]   (default: .venv-nnsmith at the repository root)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${1:-$root/.venv-nnsmith}
python=${PYTHON:-python3}

# The versions fpdiff's own venv gets (constraints.txt), so both fuzzers run the same onnx and onnxruntime.
pin() { grep -E "^$1==" "$root/constraints.txt"; }
onnx_pin=$(pin onnx)
ort_pin=$(pin onnxruntime)
numpy_pin=$(pin numpy)

"$python" -m venv "$venv"
# torch first and pinned: any unpinned torch (nnsmith's extras ask for one) would pull a multi-GB CUDA build.
"$venv/bin/pip" install --quiet torch==2.13.0
# nnsmith 0.1.0 is the newest release on PyPI; the onnxruntime extra brings onnx and onnxruntime (pinned here).
"$venv/bin/pip" install --quiet "nnsmith[onnxruntime]==0.1.0" "$onnx_pin" "$ort_pin" "$numpy_pin" \
    torch==2.13.0

# Two one-line patches to nnsmith 0.1.0 (March 2023), which predates the torch and onnx pinned here:
site=$("$venv/bin/python" -c "import nnsmith, os; print(os.path.dirname(nnsmith.__file__))")
# 1. torch.onnx.export defaults to dynamo=True since torch 2.9; that exporter needs onnxscript (not installed) and
#    is not the one nnsmith was written for (it passes TorchScript-exporter options: opset 14, TracerWarning).
#    dynamo=False keeps nnsmith's own TorchScript export, still in torch 2.13.
grep -q "dynamo=False" "$site/materialize/onnx/__init__.py" ||
    sed -i 's/^\( *\)opset_version=14,$/&\n\1dynamo=False,/' "$site/materialize/onnx/__init__.py"
# 2. onnx._serialize (a private helper) is gone from the onnx pinned here; the ONNX Runtime backend used it to hand the
#    model to InferenceSession. ModelProto.SerializeToString() gives the same bytes.
sed -i 's/onnx\._serialize(model\.native_model)/model.native_model.SerializeToString()/' \
    "$site/backends/onnxruntime.py"
grep -q "dynamo=False" "$site/materialize/onnx/__init__.py"
grep -q "native_model.SerializeToString()" "$site/backends/onnxruntime.py"
"$venv/bin/python" -c "import nnsmith, torch, onnx, onnxruntime; \
print('nnsmith', nnsmith.__version__, 'torch', torch.__version__, 'onnx', onnx.__version__, \
'onnxruntime', onnxruntime.__version__)"
