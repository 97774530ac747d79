#!/usr/bin/env bash
# CUDA cells on a machine with an NVIDIA GPU (nothing here needs the network): the CUDA tests, a Hugging Face
# checkpoint (hf:DIR, written from a config) checked on torch and inductor at every CUDA precision, and plan's speed
# figure on the GPU. Reports go to $OUT (default fpdiff-out/cuda). Run from the repository root:
#   OUT=DIR bash bench/cuda_cells.sh
set -u
OUT=${OUT:-fpdiff-out/cuda}
mkdir -p "$OUT"
CKPT=$(mktemp -d)
python -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'transformers', \
transformers.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA')"
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed"
python -m pytest -q -p no:cacheprovider tests/backends/test_cuda.py 2>&1 | tail -15
python - "$CKPT/bert" <<'PY'
import sys, torch, transformers
torch.manual_seed(0)
cfg = transformers.BertConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                              intermediate_size=1024, max_position_embeddings=128)
transformers.BertForMaskedLM(cfg).save_pretrained(sys.argv[1])
PY
python -m fpdiff check "hf:$CKPT/bert" --devices cuda --backends torch --precisions fp32,tf32,fp16,bf16,amp-fp16,amp-bf16 \
  --json "$OUT/check-hf-bert-torch-cuda.json" --no-store 2>&1 | grep -v Warning | tail -25
python -m fpdiff check "hf:$CKPT/bert" --devices cuda --backends inductor --precisions fp32,fp16 \
  --json "$OUT/check-hf-bert-inductor-cuda.json" --no-store 2>&1 | grep -v Warning | tail -12
python -m fpdiff plan example:tinyformer --device cuda --precision fp16 --json "$OUT/plan-tinyformer-cuda.json" 2>&1 \
  | grep -v Warning | tail -12
rm -rf "$CKPT"
