#!/usr/bin/env bash
# plan's speed figure on the GPU at a size where throughput, not launch latency, decides: a BERT-base-shaped
# checkpoint (hf:DIR, random weights from a config) fed 64 x 128 tokens through --inputs. Reports to $OUT.
#   OUT=DIR [PRECISIONS="fp16 bf16"] bash bench/cuda_plan_speed.sh
set -u
OUT=${OUT:-fpdiff-out/cuda}
PRECISIONS=${PRECISIONS:-fp16 bf16}
mkdir -p "$OUT"
CKPT=$(mktemp -d)
python -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 || echo "editable install failed"
python - "$CKPT" <<'PY'
import sys, numpy as np, torch, transformers
torch.manual_seed(0)
cfg = transformers.BertConfig()  # bert-base-uncased's shape: 12 layers, width 768
transformers.BertModel(cfg, add_pooling_layer=False).save_pretrained(f"{sys.argv[1]}/bert-base")
ids = np.random.default_rng(0).integers(1000, cfg.vocab_size, (64, 128))
mask = np.ones((64, 128), dtype=np.int64)
mask[32:, 96:] = 0  # half the batch padded
np.savez(f"{sys.argv[1]}/tokens.npz", input_ids=ids, attention_mask=mask)
PY
for p in $PRECISIONS; do
  python -m fpdiff plan "hf:$CKPT/bert-base" --inputs "$CKPT/tokens.npz" --device cuda --precision "$p" \
    --json "$OUT/plan-bert-base-cuda-$p.json" --no-store 2>&1 | grep -v Warning | tail -12
done
rm -rf "$CKPT"
