#!/usr/bin/env bash
# NNSmith and fpdiff fuzz against ONNX Runtime, side by side under the same load: ROUNDS rounds of NNSmith for
# SECONDS then fpdiff for SECONDS (fp16 and fp32 both; a "test" is one graph at one dtype on ORT). Needs
# bench/nnsmith/setup.sh run once. Usage: bench/fuzz_vs_nnsmith.sh [SECONDS] [ROUNDS] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-120}
ROUNDS=${2:-2}
OUT=${3:-$(mktemp -d -t fuzz-vs-nnsmith-XXXX)}
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r: NNSmith ($(uptime | sed 's/.*load average: //'))"
  .venv-nnsmith/bin/python bench/nnsmith/run.py --seconds "$SECONDS_EACH" --seed "$r" --out "$OUT/nnsmith-$r" \
    | grep -E "tests/s|tests made|reports|CPU" || true
  for form in onnx torch; do
    echo "== round $r: fpdiff fuzz, $form graphs ($(uptime | sed 's/.*load average: //'))"
    /usr/bin/time -f "fpdiff: %e s wall, %U+%S s CPU" .venv/bin/fpdiff fuzz --backends ort --precisions fp32,fp16 \
      --forms "$form" --time "${SECONDS_EACH}s" --seed "$r" --json "$OUT/fpdiff-$form-$r.json" \
      --repro-dir "$OUT/repro-$form-$r" > "$OUT/fpdiff-$form-$r.log" 2>&1 || true
    tail -1 "$OUT/fpdiff-$form-$r.log"
    .venv/bin/python - "$OUT/fpdiff-$form-$r.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cells = sum(len(r.get("statuses") or {}) for r in d["records"])
print(f"fpdiff {d['graphs']} graphs, {cells} tests (graph x dtype) in {d['duration_s']:.0f} s: "
      f"{cells / d['duration_s']:.2f} tests/s; {d['discarded']['count']} discarded; {len(d['findings'])} findings")
PY
  done
done
echo "outputs: $OUT"
