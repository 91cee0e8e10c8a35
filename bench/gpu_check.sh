#!/usr/bin/env bash
# The GPU check of the stream networks (issue 20), at most 8 minutes, nothing downloaded: on a CUDA
# machine it trains and scores MLP1's shape, the AP network's shape, the LSTM and the Transformer (the
# recipe's default shapes) for a fixed number of updates each, and prints training tokens/s (full softmax
# and importance sampling, fp32 and bf16) and exact-scoring tokens/s (bench/nplm_bench.py --device cuda),
# then writes them as JSON to $OUT/gpu_check.json (default build/). Usage: bench/gpu_check.sh [STEPS]
# DEVICE=cpu TINY=1 bench/gpu_check.sh: the same script on the CPU at nplm_bench.py's --tiny size (the test
# suite's run of it).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
STEPS=${1:-50}
OUT=${OUT:-build}
DEVICE=${DEVICE:-cuda}
if [ "$DEVICE" = cuda ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_check: CUDA is not available to $PY's torch: run it on a machine with a GPU and a CUDA build of torch (make install keeps a torch that already imports)" >&2
    exit 2
fi
mkdir -p "$OUT"
"$PY" -c "import torch; print('gpu_check:', torch.cuda.get_device_name(0) if '$DEVICE' == 'cuda' else 'the CPU', 'torch', torch.__version__)"
timeout 480 "$PY" bench/nplm_bench.py --device "$DEVICE" --shapes MLP1 AP --families lstm transformer \
    --steps "$STEPS" --eval-tokens 65536 --eval-batch 8192 ${TINY:+--tiny} --json | tee "$OUT/gpu_check.json"
"$PY" - "$OUT/gpu_check.json" <<'PYEOF'
import json, sys
figures = json.load(open(sys.argv[1]))
print(f"{'shape':12} {'objective':24} {'tokens/s':>12}")
for run in figures["runs"]:
    speed = run.get("train_tokens_per_s", run.get("eval_tokens_per_s"))
    print(f"{run['shape']:12} {run['objective']:24} {speed:12.0f}")
PYEOF
