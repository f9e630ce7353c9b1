#!/usr/bin/env bash
# Learning from scratch on a GPU: the paper preset on the seed paper's ten tasks, and its report.
#
#   benchmarks/gpu_learn.sh [OUT_DIR]                  (default: benchmarks/gpu-learn)
#   SEEDS=1 STEPS=10000 benchmarks/gpu_learn.sh        a reduced run that fits a short GPU session
#   DEVICE=cpu PRESET=smoke benchmarks/gpu_learn.sh /tmp/x   (checks the script itself without a GPU)
#
# The paper preset (theory.md section 2): 2/4/64 lr 1e-3 for UR UL UF UB, 4/4/64 lr 1e-3 for N*First,
# 4/4/256 lr 1e-4 for N*Last NF NB; up to 30,000 steps, early stop at 100% in distribution, 3 seeds,
# 2,000 test samples per bin, APE. JOBS tasks train at once in separate processes that share the GPU
# (the Python samplers, not the GPU, are the bottleneck for models this small: one CPU core each).
# Writes OUT_DIR/report.md, report.json, report.png, one JSON and plot per task, and gpu.txt (GPU, date).
# LIMIT (seconds, default 540) stops the training before a 10-minute device call would be cut off, so
# the tasks already finished are written and packed.
# On the lent GPU machine: as for benchmarks/gpu.sh (`bash benchmarks/device_wheels.sh` here, carry
# [".whl"], `PACK=1 ... benchmarks/gpu_learn.sh $OUT/learn`: results.tar.gz and summary.txt come back).
set -uo pipefail
case "${1:-}" in "" | /*) ;; *) set -- "$PWD/$1" ;; esac  # relative to where it was called from
cd "$(dirname "$0")/.."
source benchmarks/device_env.sh  # lark from .whl/ and `rasp` where the package is not installed
DEVICE=${DEVICE:-cuda}
PRESET=${PRESET:-paper}
JOBS=${JOBS:-10}
LIMIT=${LIMIT:-540}
use_out_dir "${1:-benchmarks/gpu-learn}"
if [ "$DEVICE" = cuda ]; then
  python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU: nothing to do')" || exit 2
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
fi
{ date -u +%Y-%m-%dT%H:%M:%SZ; python3 -c "import torch; print('torch', torch.__version__)"; } | tee -a "$OUT/gpu.txt"
extra=()
[ -n "${SEEDS:-}" ] && extra+=(--seeds "$SEEDS")
[ -n "${STEPS:-}" ] && extra+=(--steps "$STEPS")
[ -n "${TEST_SAMPLES:-}" ] && extra+=(--test-samples "$TEST_SAMPLES")
start=$(date +%s)
step "learn --all --preset $PRESET" "$LIMIT" "${RASP[@]}" learn --all --preset "$PRESET" --device "$DEVICE" \
  --jobs "$JOBS" --threads 1 --out "$OUT" "${extra[@]}" 2> "$OUT/log.txt" > "$OUT/report.txt"
cat "$OUT/report.txt"
echo "wall: $(( $(date +%s) - start )) s (exit $STATUS)" | tee -a "$OUT/gpu.txt" "$OUT/summary.txt"
exit "$STATUS"
